// RUN: kiln opt %s --pass round-float-scalars --split-input-file | filecheck %s

// 1/3 as an f64 is 0.333...331; to f32 to nearest it is 0.3333333432674408, exact in any
// later conversion (IREE truncates the f64 to 0.33333331).
// CHECK-LABEL: func.func @third
// CHECK:         %[[ROUNDED:.*]] = torch.constant.float 0.3333333432674408
// CHECK:         %[[Y:.*]] = torch.aten.mul.Scalar %arg0, %[[ROUNDED]]
// CHECK:         return %[[Y]]
func.func @third(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %third = torch.constant.float 0.33333333333333331
  %0 = torch.aten.mul.Scalar %x, %third : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// Every float scalar of the op: both bounds of a clamp.
// CHECK-LABEL: func.func @clamp
// CHECK-DAG:     %[[LOW:.*]] = torch.constant.float -0.10000000149011612
// CHECK-DAG:     %[[HIGH:.*]] = torch.constant.float 0.69999998807907104
// CHECK:         torch.aten.clamp %arg0, %[[LOW]], %[[HIGH]]
func.func @clamp(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %low = torch.constant.float -1.000000e-01
  %high = torch.constant.float 0.69999999999999996
  %0 = torch.aten.clamp %x, %low, %high : !torch.vtensor<[4],f32>, !torch.float, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// Must not fire: a scalar f32 represents exactly, and an f64 tensor's scalar.
// CHECK-LABEL: func.func @exact_or_f64
// CHECK:         torch.aten.mul.Scalar %arg0, %float5.000000e-01
// CHECK:         torch.aten.mul.Scalar %arg1, %float3.333330e-01
func.func @exact_or_f64(%x: !torch.vtensor<[4],f32>, %y: !torch.vtensor<[4],f64>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f64>) {
  %half = torch.constant.float 5.000000e-01
  %third = torch.constant.float 0.33333333333333331
  %0 = torch.aten.mul.Scalar %x, %half : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  %1 = torch.aten.mul.Scalar %y, %third : !torch.vtensor<[4],f64>, !torch.float -> !torch.vtensor<[4],f64>
  return %0, %1 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f64>
}
