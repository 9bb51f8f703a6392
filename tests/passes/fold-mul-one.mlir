// RUN: kiln opt %s --pass fold-mul-one --split-input-file | filecheck %s

// x * 1 (a scalar) and ones * x (a literal, on the left): both become x.
// CHECK-LABEL: func.func @scalar_and_literal_one
// CHECK-NOT:     torch.aten.mul
// CHECK:         return %arg0, %arg0
func.func @scalar_and_literal_one(%x: !torch.vtensor<[2,3],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>) {
  %int1 = torch.constant.int 1
  %ones = torch.vtensor.literal(dense<1.000000e+00> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %a = torch.aten.mul.Scalar %x, %int1 : !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %b = torch.aten.mul.Tensor %ones, %x : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  return %a, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>
}

// -----

// Must not fire: ones that broadcast x to a larger shape, a 1.0 that promotes an int tensor,
// a literal that is not all ones, and a dynamic shape (a `?` may hide a broadcast).
// CHECK-LABEL: func.func @broadcast_promote_not_one_dynamic
// CHECK-COUNT-4: torch.aten.mul
func.func @broadcast_promote_not_one_dynamic(%x: !torch.vtensor<[3],f32>, %n: !torch.vtensor<[3],si64>, %d: !torch.vtensor<[?],f32>)
    -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[?],f32>) {
  %one = torch.constant.float 1.000000e+00
  %ones = torch.vtensor.literal(dense<1.000000e+00> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %mixed = torch.vtensor.literal(dense<[1.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<3xf32>) : !torch.vtensor<[3],f32>
  %a = torch.aten.mul.Tensor %x, %ones : !torch.vtensor<[3],f32>, !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  %b = torch.aten.mul.Scalar %n, %one : !torch.vtensor<[3],si64>, !torch.float -> !torch.vtensor<[3],f32>
  %c = torch.aten.mul.Tensor %x, %mixed : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32> -> !torch.vtensor<[3],f32>
  %d1 = torch.aten.mul.Scalar %d, %one : !torch.vtensor<[?],f32>, !torch.float -> !torch.vtensor<[?],f32>
  return %a, %b, %c, %d1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[?],f32>
}
