// RUN: kiln opt %s --pass expand-pow-int --split-input-file | filecheck %s

// x^5 by repeated squaring: x^2, x^4, then x * x^4.
// CHECK-LABEL: func.func @pow5
// CHECK:         %[[X2:.*]] = torch.aten.mul.Tensor %arg0, %arg0
// CHECK-NEXT:    %[[X4:.*]] = torch.aten.mul.Tensor %[[X2]], %[[X2]]
// CHECK-NEXT:    %[[X5:.*]] = torch.aten.mul.Tensor %arg0, %[[X4]]
// CHECK-NEXT:    return %[[X5]]
func.func @pow5(%x: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3],si64> {
  %int5 = torch.constant.int 5
  %0 = torch.aten.pow.Tensor_Scalar %x, %int5 : !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],si64>
  return %0 : !torch.vtensor<[3],si64>
}

// -----

// x^0 is ones.
// CHECK-LABEL: func.func @pow0
// CHECK:         %[[Y:.*]] = torch.aten.ones_like %arg0
// CHECK:         return %[[Y]]
func.func @pow0(%x: !torch.vtensor<[3],si32>) -> !torch.vtensor<[3],si32> {
  %int0 = torch.constant.int 0
  %0 = torch.aten.pow.Tensor_Scalar %x, %int0 : !torch.vtensor<[3],si32>, !torch.int -> !torch.vtensor<[3],si32>
  return %0 : !torch.vtensor<[3],si32>
}

// -----

// Must not fire: floats (torch-to-linalg lowers those) and negative exponents.
// CHECK-LABEL: func.func @not_these
// CHECK:         torch.aten.pow.Tensor_Scalar %arg0
// CHECK:         torch.aten.pow.Tensor_Scalar %arg1
func.func @not_these(%x: !torch.vtensor<[3],f32>, %i: !torch.vtensor<[3],si64>) -> (!torch.vtensor<[3],f32>, !torch.vtensor<[3],si64>) {
  %int3 = torch.constant.int 3
  %int-1 = torch.constant.int -1
  %0 = torch.aten.pow.Tensor_Scalar %x, %int3 : !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
  %1 = torch.aten.pow.Tensor_Scalar %i, %int-1 : !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],si64>
  return %0, %1 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],si64>
}
