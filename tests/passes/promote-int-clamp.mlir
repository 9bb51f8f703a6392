// RUN: kiln opt %s --pass promote-int-clamp --split-input-file | filecheck %s

// An int64 x clamped to float bounds: converted to the f32 result first.
// CHECK-LABEL: func.func @clamp
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[3],f32>
// CHECK:         %[[Y:.*]] = torch.aten.clamp %[[UP]], %float-5.000000e-01, %float5.000000e-01 : !torch.vtensor<[3],f32>, !torch.float, !torch.float -> !torch.vtensor<[3],f32>
// CHECK:         return %[[Y]]
func.func @clamp(%x: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3],f32> {
  %lo = torch.constant.float -5.000000e-01
  %hi = torch.constant.float 5.000000e-01
  %0 = torch.aten.clamp %x, %lo, %hi : !torch.vtensor<[3],si64>, !torch.float, !torch.float -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// Must not fire: integer bounds keep an integer result.
// CHECK-LABEL: func.func @int_bounds
// CHECK-NOT:     torch.aten.to.dtype
// CHECK:         torch.aten.clamp %arg0
func.func @int_bounds(%x: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3],si64> {
  %lo = torch.constant.int -1
  %hi = torch.constant.int 1
  %0 = torch.aten.clamp %x, %lo, %hi : !torch.vtensor<[3],si64>, !torch.int, !torch.int -> !torch.vtensor<[3],si64>
  return %0 : !torch.vtensor<[3],si64>
}
