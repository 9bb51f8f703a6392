// RUN: kiln opt %s --pass fold-sub-self --split-input-file | filecheck %s

// n - n on an int64 tensor: zeros of its type.
// CHECK-LABEL: func.func @int_minus_itself
// CHECK-NEXT:    %[[ZEROS:.*]] = torch.vtensor.literal(dense<0> : tensor<2x3xsi64>) : !torch.vtensor<[2,3],si64>
// CHECK-NEXT:    return %[[ZEROS]]
func.func @int_minus_itself(%n: !torch.vtensor<[2,3],si64>) -> !torch.vtensor<[2,3],si64> {
  %int1 = torch.constant.int 1
  %d = torch.aten.sub.Tensor %n, %n, %int1 : !torch.vtensor<[2,3],si64>, !torch.vtensor<[2,3],si64>, !torch.int -> !torch.vtensor<[2,3],si64>
  return %d : !torch.vtensor<[2,3],si64>
}

// -----

// Must not fire: floats (inf - inf is NaN), alpha 2 (n - 2n), two different tensors.
// CHECK-LABEL: func.func @float_alpha_different
// CHECK-COUNT-3: torch.aten.sub.Tensor
func.func @float_alpha_different(%x: !torch.vtensor<[3],f32>, %n: !torch.vtensor<[3],si64>, %m: !torch.vtensor<[3],si64>)
    -> (!torch.vtensor<[3],f32>, !torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>) {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %a = torch.aten.sub.Tensor %x, %x, %int1 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
  %b = torch.aten.sub.Tensor %n, %n, %int2 : !torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],si64>
  %c = torch.aten.sub.Tensor %n, %m, %int1 : !torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],si64>
  return %a, %b, %c : !torch.vtensor<[3],f32>, !torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>
}
