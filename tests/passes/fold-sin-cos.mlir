// RUN: kiln opt %s --pass fold-sin-cos --split-input-file | filecheck %s

// sin(x)^2 + cos(x)^2, squares as pow: ones of the add's type; sin, cos and pow are gone.
// CHECK-LABEL: func.func @pow_squares
// CHECK-NEXT:    %[[ONES:.*]] = torch.vtensor.literal(dense<1.000000e+00> : tensor<4x8xf32>) : !torch.vtensor<[4,8],f32>
// CHECK-NEXT:    return %[[ONES]]
func.func @pow_squares(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %sin = torch.aten.sin %x : !torch.vtensor<[4,8],f32> -> !torch.vtensor<[4,8],f32>
  %sin2 = torch.aten.pow.Tensor_Scalar %sin, %int2 : !torch.vtensor<[4,8],f32>, !torch.int -> !torch.vtensor<[4,8],f32>
  %cos = torch.aten.cos %x : !torch.vtensor<[4,8],f32> -> !torch.vtensor<[4,8],f32>
  %cos2 = torch.aten.pow.Tensor_Scalar %cos, %int2 : !torch.vtensor<[4,8],f32>, !torch.int -> !torch.vtensor<[4,8],f32>
  %sum = torch.aten.add.Tensor %sin2, %cos2, %int1 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>, !torch.int -> !torch.vtensor<[4,8],f32>
  return %sum : !torch.vtensor<[4,8],f32>
}

// -----

// cos first, squares as products (what expand-pow-small leaves), f16: ones in f16.
// CHECK-LABEL: func.func @mul_squares_cos_first
// CHECK-NEXT:    %[[ONES:.*]] = torch.vtensor.literal(dense<1.000000e+00> : tensor<3xf16>) : !torch.vtensor<[3],f16>
// CHECK-NEXT:    return %[[ONES]]
func.func @mul_squares_cos_first(%x: !torch.vtensor<[3],f16>) -> !torch.vtensor<[3],f16> {
  %int1 = torch.constant.int 1
  %cos = torch.aten.cos %x : !torch.vtensor<[3],f16> -> !torch.vtensor<[3],f16>
  %cos2 = torch.aten.mul.Tensor %cos, %cos : !torch.vtensor<[3],f16>, !torch.vtensor<[3],f16> -> !torch.vtensor<[3],f16>
  %sin = torch.aten.sin %x : !torch.vtensor<[3],f16> -> !torch.vtensor<[3],f16>
  %sin2 = torch.aten.mul.Tensor %sin, %sin : !torch.vtensor<[3],f16>, !torch.vtensor<[3],f16> -> !torch.vtensor<[3],f16>
  %sum = torch.aten.add.Tensor %cos2, %sin2, %int1 : !torch.vtensor<[3],f16>, !torch.vtensor<[3],f16>, !torch.int -> !torch.vtensor<[3],f16>
  return %sum : !torch.vtensor<[3],f16>
}

// -----

// Must not fire: sin and cos of different tensors.
// CHECK-LABEL: func.func @different_arguments
// CHECK:         torch.aten.sin %arg0
// CHECK:         torch.aten.cos %arg1
// CHECK:         torch.aten.add.Tensor
func.func @different_arguments(%x: !torch.vtensor<[4],f32>, %y: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %sin = torch.aten.sin %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %sin2 = torch.aten.pow.Tensor_Scalar %sin, %int2 : !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  %cos = torch.aten.cos %y : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %cos2 = torch.aten.pow.Tensor_Scalar %cos, %int2 : !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  %sum = torch.aten.add.Tensor %sin2, %cos2, %int1 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  return %sum : !torch.vtensor<[4],f32>
}

// -----

// Must not fire: alpha 2 makes it sin^2 + 2 cos^2; and sin^3 is not a square.
// CHECK-LABEL: func.func @alpha_two_and_cube
// CHECK:         torch.aten.add.Tensor
// CHECK:         torch.aten.add.Tensor
func.func @alpha_two_and_cube(%x: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) {
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int1 = torch.constant.int 1
  %sin = torch.aten.sin %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %sin2 = torch.aten.pow.Tensor_Scalar %sin, %int2 : !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  %sin3 = torch.aten.pow.Tensor_Scalar %sin, %int3 : !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  %cos = torch.aten.cos %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %cos2 = torch.aten.pow.Tensor_Scalar %cos, %int2 : !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  %a = torch.aten.add.Tensor %sin2, %cos2, %int2 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  %b = torch.aten.add.Tensor %sin3, %cos2, %int1 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  return %a, %b : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}
