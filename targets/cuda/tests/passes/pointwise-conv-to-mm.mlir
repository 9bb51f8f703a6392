// RUN: kiln opt %s --pass pointwise-conv-to-mm --split-input-file | filecheck %s

// A bf16 1x1 convolution of a batch of 2, with a bias: W @ X per image (the weight broadcast over the
// batch is the bmm's first operand), the bias added after. No permute: NCHW in and out.
// CHECK-LABEL: func.func @batched_with_bias
// CHECK:         %[[W:.*]] = torch.aten.view %arg1, {{.*}} -> !torch.vtensor<[32,64],bf16>
// CHECK:         %[[WB:.*]] = torch.aten.broadcast_to %[[W]], {{.*}} -> !torch.vtensor<[2,32,64],bf16>
// CHECK:         %[[X:.*]] = torch.aten.view %arg0, {{.*}} -> !torch.vtensor<[2,64,49],bf16>
// CHECK:         %[[P:.*]] = torch.aten.bmm %[[WB]], %[[X]] : {{.*}} -> !torch.vtensor<[2,32,49],bf16>
// CHECK:         %[[Y:.*]] = torch.aten.view %[[P]], {{.*}} -> !torch.vtensor<[2,32,7,7],bf16>
// CHECK:         %[[B:.*]] = torch.aten.view %arg2, {{.*}} -> !torch.vtensor<[1,32,1,1],bf16>
// CHECK:         %[[S:.*]] = torch.aten.add.Tensor %[[Y]], %[[B]]
// CHECK-NOT:     torch.aten.convolution
// CHECK-NOT:     torch.aten.permute
// CHECK:         return %[[S]]
module {
  func.func @batched_with_bias(%x: !torch.vtensor<[2,64,7,7],bf16>, %w: !torch.vtensor<[32,64,1,1],bf16>, %b: !torch.vtensor<[32],bf16>) -> !torch.vtensor<[2,32,7,7],bf16> {
    %int1 = torch.constant.int 1
    %int0 = torch.constant.int 0
    %false = torch.constant.bool false
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %y = torch.aten.convolution %x, %w, %b, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[2,64,7,7],bf16>, !torch.vtensor<[32,64,1,1],bf16>, !torch.vtensor<[32],bf16>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[2,32,7,7],bf16>
    return %y : !torch.vtensor<[2,32,7,7],bf16>
  }
}

// -----

// One image: a plain matmul, W[K, C] @ X[C, H*W].
// CHECK-LABEL: func.func @one_image
// CHECK:         %[[W:.*]] = torch.aten.view %arg1, {{.*}} -> !torch.vtensor<[16,8],f16>
// CHECK:         %[[X:.*]] = torch.aten.view %arg0, {{.*}} -> !torch.vtensor<[8,20],f16>
// CHECK:         %[[P:.*]] = torch.aten.mm %[[W]], %[[X]] : {{.*}} -> !torch.vtensor<[16,20],f16>
// CHECK:         %[[Y:.*]] = torch.aten.view %[[P]], {{.*}} -> !torch.vtensor<[1,16,4,5],f16>
// CHECK-NEXT:    return %[[Y]]
module {
  func.func @one_image(%x: !torch.vtensor<[1,8,4,5],f16>, %w: !torch.vtensor<[16,8,1,1],f16>) -> !torch.vtensor<[1,16,4,5],f16> {
    %none = torch.constant.none
    %int1 = torch.constant.int 1
    %int0 = torch.constant.int 0
    %false = torch.constant.bool false
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %y = torch.aten.convolution %x, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,4,5],f16>, !torch.vtensor<[16,8,1,1],f16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,4,5],f16>
    return %y : !torch.vtensor<[1,16,4,5],f16>
  }
}

// -----

// Must not fire: f32 (IREE computes it right), a 3x3 kernel, a strided or padded 1x1 convolution.
// CHECK-LABEL: func.func @not_rewritten
// CHECK-COUNT-4: torch.aten.convolution
// CHECK-NOT:     torch.aten.mm
// CHECK-NOT:     torch.aten.bmm
module {
  func.func @not_rewritten(%x: !torch.vtensor<[1,8,6,6],f32>, %w: !torch.vtensor<[16,8,1,1],f32>, %xb: !torch.vtensor<[1,8,6,6],bf16>, %w3: !torch.vtensor<[16,8,3,3],bf16>, %w1: !torch.vtensor<[16,8,1,1],bf16>) -> (!torch.vtensor<[1,16,6,6],f32>, !torch.vtensor<[1,16,4,4],bf16>, !torch.vtensor<[1,16,3,3],bf16>, !torch.vtensor<[1,16,8,8],bf16>) {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %twos = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %a = torch.aten.convolution %x, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,6,6],f32>, !torch.vtensor<[16,8,1,1],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,6,6],f32>
    %b = torch.aten.convolution %xb, %w3, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,6,6],bf16>, !torch.vtensor<[16,8,3,3],bf16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,4,4],bf16>
    %c = torch.aten.convolution %xb, %w1, %none, %twos, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,6,6],bf16>, !torch.vtensor<[16,8,1,1],bf16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,3,3],bf16>
    %d = torch.aten.convolution %xb, %w1, %none, %ones, %ones, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,6,6],bf16>, !torch.vtensor<[16,8,1,1],bf16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,8,8],bf16>
    return %a, %b, %c, %d : !torch.vtensor<[1,16,6,6],f32>, !torch.vtensor<[1,16,4,4],bf16>, !torch.vtensor<[1,16,3,3],bf16>, !torch.vtensor<[1,16,8,8],bf16>
  }
}
