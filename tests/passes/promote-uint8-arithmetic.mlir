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

// -----

// float -> uint8 through int32, truncated (fptosi to i8 has no 128..255); uint8 from an integer,
// and float to int8, stay as they are.
// CHECK-LABEL: func.func @float_to_uint8
// CHECK:         %[[WIDE:.*]] = torch.aten.to.dtype %arg0, %int3{{.*}} : !torch.vtensor<[4],f32>, {{.*}} -> !torch.vtensor<[4],si32>
// CHECK:         %[[U8:.*]] = torch.aten.to.dtype %[[WIDE]], %int0{{.*}} -> !torch.vtensor<[4],ui8>
// CHECK:         %[[WIDE_F16:.*]] = torch.aten.to.dtype %arg1, %int3{{.*}} : !torch.vtensor<[4],f16>, {{.*}} -> !torch.vtensor<[4],si32>
// CHECK:         %[[U8_F16:.*]] = torch.aten.to.dtype %[[WIDE_F16]], %int0{{.*}} -> !torch.vtensor<[4],ui8>
// CHECK:         %[[FROM_INT:.*]] = torch.aten.to.dtype %arg2, %int0{{.*}} : !torch.vtensor<[4],si16>, {{.*}} -> !torch.vtensor<[4],ui8>
// CHECK:         %[[I8:.*]] = torch.aten.to.dtype %arg0, %int1{{.*}} : !torch.vtensor<[4],f32>, {{.*}} -> !torch.vtensor<[4],si8>
// CHECK:         return %[[U8]], %[[U8_F16]], %[[FROM_INT]], %[[I8]]
func.func @float_to_uint8(%x: !torch.vtensor<[4],f32>, %h: !torch.vtensor<[4],f16>, %i: !torch.vtensor<[4],si16>) -> (!torch.vtensor<[4],ui8>, !torch.vtensor<[4],ui8>, !torch.vtensor<[4],ui8>, !torch.vtensor<[4],si8>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %0 = torch.aten.to.dtype %x, %int0, %false, %false, %none : !torch.vtensor<[4],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[4],ui8>
  %1 = torch.aten.to.dtype %h, %int0, %false, %false, %none : !torch.vtensor<[4],f16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[4],ui8>
  %2 = torch.aten.to.dtype %i, %int0, %false, %false, %none : !torch.vtensor<[4],si16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[4],ui8>
  %3 = torch.aten.to.dtype %x, %int1, %false, %false, %none : !torch.vtensor<[4],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[4],si8>
  return %0, %1, %2, %3 : !torch.vtensor<[4],ui8>, !torch.vtensor<[4],ui8>, !torch.vtensor<[4],ui8>, !torch.vtensor<[4],si8>
}
