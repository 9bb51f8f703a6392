// RUN: kiln opt %s --pass int-to-bf16-via-f32 --split-input-file | filecheck %s

// An int64 tensor converted to bf16 (Swin's window mask): through f32, halved, rounded, doubled.
// CHECK-LABEL: func.func @int_to_bf16
// CHECK:         %[[WIDE:.*]] = torch.aten.to.dtype %arg0, %int6, {{.*}} : !torch.vtensor<[3],si64>, {{.*}} -> !torch.vtensor<[3],f32>
// CHECK:         %[[HALF:.*]] = torch.aten.mul.Scalar %[[WIDE]], %float5.000000e-01 : !torch.vtensor<[3],f32>, !torch.float -> !torch.vtensor<[3],f32>
// CHECK:         %[[ROUNDED:.*]] = torch.aten.to.dtype %[[HALF]], %int15, {{.*}} -> !torch.vtensor<[3],bf16>
// CHECK:         %[[Y:.*]] = torch.aten.mul.Scalar %[[ROUNDED]], %float2.000000e00 : !torch.vtensor<[3],bf16>, !torch.float -> !torch.vtensor<[3],bf16>
// CHECK:         return %[[Y]]
func.func @int_to_bf16(%x: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3],bf16> {
  %int15 = torch.constant.int 15
  %false = torch.constant.bool false
  %none = torch.constant.none
  %0 = torch.aten.to.dtype %x, %int15, %false, %false, %none : !torch.vtensor<[3],si64>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[3],bf16>
  return %0 : !torch.vtensor<[3],bf16>
}

// -----

// A bool tensor too.
// CHECK-LABEL: func.func @bool_to_bf16
// CHECK:         torch.aten.to.dtype %arg0, %int6, {{.*}} : !torch.vtensor<[2,3],i1>, {{.*}} -> !torch.vtensor<[2,3],f32>
// CHECK:         torch.aten.mul.Scalar
// CHECK:         torch.aten.to.dtype {{.*}} -> !torch.vtensor<[2,3],bf16>
// CHECK:         torch.aten.mul.Scalar
func.func @bool_to_bf16(%x: !torch.vtensor<[2,3],i1>) -> !torch.vtensor<[2,3],bf16> {
  %int15 = torch.constant.int 15
  %false = torch.constant.bool false
  %none = torch.constant.none
  %0 = torch.aten.to.dtype %x, %int15, %false, %false, %none : !torch.vtensor<[2,3],i1>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[2,3],bf16>
  return %0 : !torch.vtensor<[2,3],bf16>
}

// -----

// Must not fire: an int to f32 or f16, and a float to bf16, convert as they are.
// CHECK-LABEL: func.func @others
// CHECK-NOT:     torch.aten.mul.Scalar
// CHECK:         torch.aten.to.dtype %arg0, %int6
// CHECK:         torch.aten.to.dtype %arg0, %int5
// CHECK:         torch.aten.to.dtype %arg1, %int15
// CHECK-NOT:     torch.aten.mul.Scalar
func.func @others(%x: !torch.vtensor<[3],si32>, %y: !torch.vtensor<[3],f32>) -> (!torch.vtensor<[3],f32>, !torch.vtensor<[3],f16>, !torch.vtensor<[3],bf16>) {
  %int6 = torch.constant.int 6
  %int5 = torch.constant.int 5
  %int15 = torch.constant.int 15
  %false = torch.constant.bool false
  %none = torch.constant.none
  %0 = torch.aten.to.dtype %x, %int6, %false, %false, %none : !torch.vtensor<[3],si32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[3],f32>
  %1 = torch.aten.to.dtype %x, %int5, %false, %false, %none : !torch.vtensor<[3],si32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[3],f16>
  %2 = torch.aten.to.dtype %y, %int15, %false, %false, %none : !torch.vtensor<[3],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[3],bf16>
  return %0, %1, %2 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f16>, !torch.vtensor<[3],bf16>
}
