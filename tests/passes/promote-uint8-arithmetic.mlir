// RUN: kiln opt %s --pass promote-uint8-arithmetic --split-input-file | filecheck %s

// x * 3 + 1 of a uint8 tensor: each in int32 from the zero-extended operand, truncated back.
// CHECK-LABEL: func.func @scalar_arithmetic
// CHECK:         %[[WIDE:.*]] = torch.aten.to.dtype %arg0, %int3{{.*}} -> !torch.vtensor<[4],si32>
// CHECK:         %[[PRODUCT:.*]] = torch.aten.mul.Scalar %[[WIDE]], %int3{{.*}} -> !torch.vtensor<[4],si32>
// CHECK:         %[[NARROW:.*]] = torch.aten.to.dtype %[[PRODUCT]], %int0{{.*}} -> !torch.vtensor<[4],ui8>
// CHECK:         %[[WIDE2:.*]] = torch.aten.to.dtype %[[NARROW]], %int3{{.*}} -> !torch.vtensor<[4],si32>
// CHECK:         %[[SUM:.*]] = torch.aten.add.Scalar %[[WIDE2]], %int1, %int1 {{.*}} -> !torch.vtensor<[4],si32>
// CHECK:         %[[Y:.*]] = torch.aten.to.dtype %[[SUM]], %int0{{.*}} -> !torch.vtensor<[4],ui8>
// CHECK:         return %[[Y]]
func.func @scalar_arithmetic(%x: !torch.vtensor<[4],ui8>) -> !torch.vtensor<[4],ui8> {
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %0 = torch.aten.mul.Scalar %x, %int3 : !torch.vtensor<[4],ui8>, !torch.int -> !torch.vtensor<[4],ui8>
  %1 = torch.aten.add.Scalar %0, %int1, %int1 : !torch.vtensor<[4],ui8>, !torch.int, !torch.int -> !torch.vtensor<[4],ui8>
  return %1 : !torch.vtensor<[4],ui8>
}

// -----

// Must not fire: int8 (torch-to-linalg converts scalars to it) and a uint8 tensor-tensor sum.
// CHECK-LABEL: func.func @other_types
// CHECK-NOT:     torch.aten.to.dtype
// CHECK:         torch.aten.mul.Scalar %arg0
// CHECK:         torch.aten.add.Tensor %arg1, %arg1
func.func @other_types(%x: !torch.vtensor<[4],si8>, %u: !torch.vtensor<[4],ui8>) -> (!torch.vtensor<[4],si8>, !torch.vtensor<[4],ui8>) {
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %0 = torch.aten.mul.Scalar %x, %int3 : !torch.vtensor<[4],si8>, !torch.int -> !torch.vtensor<[4],si8>
  %1 = torch.aten.add.Tensor %u, %u, %int1 : !torch.vtensor<[4],ui8>, !torch.vtensor<[4],ui8>, !torch.int -> !torch.vtensor<[4],ui8>
  return %0, %1 : !torch.vtensor<[4],si8>, !torch.vtensor<[4],ui8>
}
