// RUN: kiln opt %s --pass expand-pow-small --split-input-file | filecheck %s

// pow(x, 2) and pow(x, 2.0) become x * x.
// CHECK-LABEL: func.func @squares
// CHECK:         %[[A:.*]] = torch.aten.mul.Tensor %arg0, %arg0 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
// CHECK:         %[[B:.*]] = torch.aten.mul.Tensor %arg1, %arg1 : !torch.vtensor<[5],si64>, !torch.vtensor<[5],si64> -> !torch.vtensor<[5],si64>
// CHECK-NOT:     torch.aten.pow
// CHECK:         return %[[A]], %[[B]]
func.func @squares(%x: !torch.vtensor<[2,3],f32>, %n: !torch.vtensor<[5],si64>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[5],si64>) {
  %two = torch.constant.float 2.000000e+00
  %int2 = torch.constant.int 2
  %a = torch.aten.pow.Tensor_Scalar %x, %two : !torch.vtensor<[2,3],f32>, !torch.float -> !torch.vtensor<[2,3],f32>
  %b = torch.aten.pow.Tensor_Scalar %n, %int2 : !torch.vtensor<[5],si64>, !torch.int -> !torch.vtensor<[5],si64>
  return %a, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[5],si64>
}

// -----

// A cube is a product of three, squared first as PyTorch computes it (rounding after each product).
// CHECK-LABEL: func.func @cube
// CHECK:         %[[SQ:.*]] = torch.aten.mul.Tensor %arg0, %arg0 : !torch.vtensor<[3],bf16>
// CHECK:         %[[CUBE:.*]] = torch.aten.mul.Tensor %[[SQ]], %arg0 : !torch.vtensor<[3],bf16>
// CHECK-NOT:     torch.aten.pow
// CHECK:         return %[[CUBE]]
func.func @cube(%x: !torch.vtensor<[3],bf16>) -> !torch.vtensor<[3],bf16> {
  %three = torch.constant.float 3.000000e+00
  %a = torch.aten.pow.Tensor_Scalar %x, %three : !torch.vtensor<[3],bf16>, !torch.float -> !torch.vtensor<[3],bf16>
  return %a : !torch.vtensor<[3],bf16>
}

// -----

// Must not fire: a fourth power, and an int tensor squared with 2.0 (its result is float).
// CHECK-LABEL: func.func @fourth_and_promoted
// CHECK-COUNT-2: torch.aten.pow.Tensor_Scalar
// CHECK-NOT:     torch.aten.mul
func.func @fourth_and_promoted(%x: !torch.vtensor<[3],f32>, %n: !torch.vtensor<[3],si64>) -> (!torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>) {
  %int4 = torch.constant.int 4
  %two = torch.constant.float 2.000000e+00
  %a = torch.aten.pow.Tensor_Scalar %x, %int4 : !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
  %b = torch.aten.pow.Tensor_Scalar %n, %two : !torch.vtensor<[3],si64>, !torch.float -> !torch.vtensor<[3],f32>
  return %a, %b : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>
}
