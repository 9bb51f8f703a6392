// RUN: kiln opt %s --pass fmod-scalar-to-tensor --split-input-file | filecheck %s

// The scalar becomes a 0-d literal of x's dtype: the fmod torch-mlir decomposes.
// CHECK-LABEL: func.func @fmod
// CHECK:         %[[DIVISOR:.*]] = torch.vtensor.literal(dense<1.500000e+00> : tensor<f32>) : !torch.vtensor<[],f32>
// CHECK:         %[[Y:.*]] = torch.aten.fmod.Tensor %arg0, %[[DIVISOR]] : !torch.vtensor<[3,5],f32>, !torch.vtensor<[],f32> -> !torch.vtensor<[3,5],f32>
// CHECK:         return %[[Y]]
func.func @fmod(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[3,5],f32> {
  %float1.5 = torch.constant.float 1.500000e+00
  %0 = torch.aten.fmod.Scalar %x, %float1.5 : !torch.vtensor<[3,5],f32>, !torch.float -> !torch.vtensor<[3,5],f32>
  return %0 : !torch.vtensor<[3,5],f32>
}

// -----

// Must not fire: an integer x with a float divisor (PyTorch promotes the result to float).
// CHECK-LABEL: func.func @promoted
// CHECK:         torch.aten.fmod.Scalar
func.func @promoted(%x: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3],f32> {
  %float1.5 = torch.constant.float 1.500000e+00
  %0 = torch.aten.fmod.Scalar %x, %float1.5 : !torch.vtensor<[3],si64>, !torch.float -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}
