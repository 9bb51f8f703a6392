// RUN: kiln opt %s --pass decompose-gelu --split-input-file | filecheck %s

// gelu(x): x * 0.5 * (1 + erf(x * 1/sqrt(2))).
// CHECK-LABEL: func.func @erf_gelu
// CHECK-DAG:     %[[RSQRT2:.*]] = torch.constant.float 0.70710678118654757
// CHECK-DAG:     %[[HALF:.*]] = torch.constant.float 5.000000e-01
// CHECK-DAG:     %[[ONE:.*]] = torch.constant.float 1.000000e+00
// CHECK:         %[[SCALED:.*]] = torch.aten.mul.Scalar %arg0, %[[RSQRT2]]
// CHECK-NEXT:    %[[ERF:.*]] = torch.aten.erf %[[SCALED]]
// CHECK-NEXT:    %[[X_HALF:.*]] = torch.aten.mul.Scalar %arg0, %[[HALF]]
// CHECK-NEXT:    %[[GATE:.*]] = torch.aten.add.Scalar %[[ERF]], %[[ONE]]
// CHECK-NEXT:    %[[Y:.*]] = torch.aten.mul.Tensor %[[X_HALF]], %[[GATE]] : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32> -> !torch.vtensor<[4,8],f32>
// CHECK-NEXT:    return %[[Y]]
func.func @erf_gelu(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
  %none = torch.constant.str "none"
  %y = torch.aten.gelu %x, %none : !torch.vtensor<[4,8],f32>, !torch.str -> !torch.vtensor<[4,8],f32>
  return %y : !torch.vtensor<[4,8],f32>
}

// -----

// gelu(x, "tanh"): x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
// CHECK-LABEL: func.func @tanh_gelu
// CHECK:         %[[X2:.*]] = torch.aten.mul.Tensor %arg0, %arg0
// CHECK-NEXT:    %[[X3:.*]] = torch.aten.mul.Tensor %[[X2]], %arg0
// CHECK:         torch.aten.mul.Scalar %[[X3]]
// CHECK:         torch.aten.add.Tensor %arg0
// CHECK:         torch.aten.tanh
// CHECK-NOT:     torch.aten.gelu
func.func @tanh_gelu(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %tanh = torch.constant.str "tanh"
  %y = torch.aten.gelu %x, %tanh : !torch.vtensor<[4],f32>, !torch.str -> !torch.vtensor<[4],f32>
  return %y : !torch.vtensor<[4],f32>
}

// -----

// bf16: computed in f32, rounded to bf16 once at the end.
// CHECK-LABEL: func.func @bf16_gelu
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[4],f32>
// CHECK:         torch.aten.erf {{.*}} -> !torch.vtensor<[4],f32>
// CHECK:         %[[DOWN:.*]] = torch.aten.to.dtype {{.*}} -> !torch.vtensor<[4],bf16>
// CHECK-NEXT:    return %[[DOWN]]
func.func @bf16_gelu(%x: !torch.vtensor<[4],bf16>) -> !torch.vtensor<[4],bf16> {
  %none = torch.constant.str "none"
  %y = torch.aten.gelu %x, %none : !torch.vtensor<[4],bf16>, !torch.str -> !torch.vtensor<[4],bf16>
  return %y : !torch.vtensor<[4],bf16>
}

// -----

// Must not fire: an approximation that is not a constant.
// CHECK-LABEL: func.func @unknown_approximation
// CHECK:         torch.aten.gelu %arg0, %arg1
func.func @unknown_approximation(%x: !torch.vtensor<[4],f32>, %mode: !torch.str) -> !torch.vtensor<[4],f32> {
  %y = torch.aten.gelu %x, %mode : !torch.vtensor<[4],f32>, !torch.str -> !torch.vtensor<[4],f32>
  return %y : !torch.vtensor<[4],f32>
}
