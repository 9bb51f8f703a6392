// RUN: kiln opt %s --pass heads-last-attention-inputs --split-input-file | filecheck %s

// Q scaled by a [1, 1, s, d] table after its head transpose: the product runs on [b, s, h, d] (the
// table transposed instead), and attention reads one transpose of it, which outline-contractions peels.
// CHECK-LABEL: func.func @scaled_query
// CHECK:         %[[TABLE:.*]] = torch.aten.permute %arg3, %{{.*}} : !torch.vtensor<[1,1,4,16],f32>, !torch.list<int> -> !torch.vtensor<[1,4,1,16],f32>
// CHECK:         %[[Q:.*]] = torch.aten.mul.Tensor %arg0, %[[TABLE]] : !torch.vtensor<[2,4,3,16],f32>, !torch.vtensor<[1,4,1,16],f32> -> !torch.vtensor<[2,4,3,16],f32>
// CHECK:         %[[QT:.*]] = torch.aten.permute %[[Q]], %{{.*}} -> !torch.vtensor<[2,3,4,16],f32>
// CHECK:         torch.aten.scaled_dot_product_attention %[[QT]],
func.func @scaled_query(%q: !torch.vtensor<[2,4,3,16],f32>, %k: !torch.vtensor<[2,4,3,16],f32>, %v: !torch.vtensor<[2,4,3,16],f32>, %cos: !torch.vtensor<[1,1,4,16],f32>) -> !torch.vtensor<[2,3,4,16],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %none = torch.constant.none
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %float0 = torch.constant.float 0.000000e+00
  %dims = torch.prim.ListConstruct %int0, %int2, %int1, %int3 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %qh = torch.aten.permute %q, %dims : !torch.vtensor<[2,4,3,16],f32>, !torch.list<int> -> !torch.vtensor<[2,3,4,16],f32>
  %kh = torch.aten.permute %k, %dims : !torch.vtensor<[2,4,3,16],f32>, !torch.list<int> -> !torch.vtensor<[2,3,4,16],f32>
  %vh = torch.aten.permute %v, %dims : !torch.vtensor<[2,4,3,16],f32>, !torch.list<int> -> !torch.vtensor<[2,3,4,16],f32>
  %scaled = torch.aten.mul.Tensor %qh, %cos : !torch.vtensor<[2,3,4,16],f32>, !torch.vtensor<[1,1,4,16],f32> -> !torch.vtensor<[2,3,4,16],f32>
  %y = torch.aten.scaled_dot_product_attention %scaled, %kh, %vh, %none, %float0, %true, %none, %false : !torch.vtensor<[2,3,4,16],f32>, !torch.vtensor<[2,3,4,16],f32>, !torch.vtensor<[2,3,4,16],f32>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[2,3,4,16],f32>
  return %y : !torch.vtensor<[2,3,4,16],f32>
}

// -----

// Must not fire: Q plus a full-size tensor that is no transpose (moving it would copy it whole).
// CHECK-LABEL: func.func @full_size_operand
// CHECK:         %[[QH:.*]] = torch.aten.permute %arg0
// CHECK:         %[[SUM:.*]] = torch.aten.add.Tensor %[[QH]], %arg3
// CHECK:         torch.aten.scaled_dot_product_attention %[[SUM]],
func.func @full_size_operand(%q: !torch.vtensor<[2,4,3,16],f32>, %k: !torch.vtensor<[2,3,4,16],f32>, %v: !torch.vtensor<[2,3,4,16],f32>, %bias: !torch.vtensor<[2,3,4,16],f32>) -> !torch.vtensor<[2,3,4,16],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %none = torch.constant.none
  %false = torch.constant.bool false
  %float0 = torch.constant.float 0.000000e+00
  %dims = torch.prim.ListConstruct %int0, %int2, %int1, %int3 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %qh = torch.aten.permute %q, %dims : !torch.vtensor<[2,4,3,16],f32>, !torch.list<int> -> !torch.vtensor<[2,3,4,16],f32>
  %sum = torch.aten.add.Tensor %qh, %bias, %int1 : !torch.vtensor<[2,3,4,16],f32>, !torch.vtensor<[2,3,4,16],f32>, !torch.int -> !torch.vtensor<[2,3,4,16],f32>
  %y = torch.aten.scaled_dot_product_attention %sum, %k, %v, %none, %float0, %false, %none, %false : !torch.vtensor<[2,3,4,16],f32>, !torch.vtensor<[2,3,4,16],f32>, !torch.vtensor<[2,3,4,16],f32>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[2,3,4,16],f32>
  return %y : !torch.vtensor<[2,3,4,16],f32>
}
