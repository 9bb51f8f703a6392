// RUN: kiln opt %s --pass fold-add-zero --split-input-file | filecheck %s

// x + 0 (scalar, any finite alpha), x - 0.0, zeros + x (alpha 1), x - zeros: all become x.
// CHECK-LABEL: func.func @zeros_vanish
// CHECK-NOT:     torch.aten.add
// CHECK-NOT:     torch.aten.sub
// CHECK:         return %arg0, %arg0, %arg0, %arg0
func.func @zeros_vanish(%x: !torch.vtensor<[2,3],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %zero = torch.constant.float 0.000000e+00
  %zeros = torch.vtensor.literal(dense<0.000000e+00> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %a = torch.aten.add.Scalar %x, %int0, %int3 : !torch.vtensor<[2,3],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,3],f32>
  %b = torch.aten.sub.Scalar %x, %zero, %int1 : !torch.vtensor<[2,3],f32>, !torch.float, !torch.int -> !torch.vtensor<[2,3],f32>
  %c = torch.aten.add.Tensor %zeros, %x, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %d = torch.aten.sub.Tensor %x, %zeros, %int3 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  return %a, %b, %c, %d : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>
}

// -----

// Must not fire: zeros + x with alpha 2 (that is 2x), 0 - x (that is -x), a zero that
// broadcasts x, and an alpha that is not a constant.
// CHECK-LABEL: func.func @not_zero_plus_x
// CHECK-COUNT-4: torch.aten.{{add|sub}}
func.func @not_zero_plus_x(%x: !torch.vtensor<[3],f32>, %alpha: !torch.int) -> (!torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[3],f32>) {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %zeros = torch.vtensor.literal(dense<0.000000e+00> : tensor<3xf32>) : !torch.vtensor<[3],f32>
  %zeros2 = torch.vtensor.literal(dense<0.000000e+00> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %a = torch.aten.add.Tensor %zeros, %x, %int2 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
  %b = torch.aten.sub.Tensor %zeros, %x, %int1 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
  %c = torch.aten.add.Tensor %x, %zeros2, %int1 : !torch.vtensor<[3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %d = torch.aten.add.Tensor %x, %zeros, %alpha : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
  return %a, %b, %c, %d : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[3],f32>
}
