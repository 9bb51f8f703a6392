// RUN: kiln opt %s --pass fold-pad-into-conv --split-input-file | filecheck %s

// TensorFlow's "same" padding at stride 1: the (1, 1) zero pad becomes the depthwise convolution's padding.
// CHECK-LABEL: func.func @same_stride_1
// CHECK-NOT:     torch.aten.constant_pad_nd
// CHECK:         %[[PADDING:.*]] = torch.prim.ListConstruct %[[ONE:.*]], %[[ONE]] : (!torch.int, !torch.int) -> !torch.list<int>
// CHECK:         %[[Y:.*]] = torch.aten.convolution %arg0, %arg1, %none, %{{.*}}, %[[PADDING]],
// CHECK-SAME:      -> !torch.vtensor<[1,8,7,7],f32>
// CHECK-NEXT:    return %[[Y]]
func.func @same_stride_1(%x: !torch.vtensor<[1,8,7,7],f32>, %w: !torch.vtensor<[8,1,3,3],f32>) -> !torch.vtensor<[1,8,7,7],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %zero = torch.constant.float 0.000000e+00
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int8 = torch.constant.int 8
  %pads = torch.prim.ListConstruct %int1, %int1, %int1, %int1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %x, %pads, %zero : !torch.vtensor<[1,8,7,7],f32>, !torch.list<int>, !torch.float -> !torch.vtensor<[1,8,9,9],f32>
  %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %y = torch.aten.convolution %padded, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int8 : !torch.vtensor<[1,8,9,9],f32>, !torch.vtensor<[8,1,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,7,7],f32>
  return %y : !torch.vtensor<[1,8,7,7],f32>
}

// -----

// More padding after than before, where the stride-2 convolution never reads the extra: (1, 2) on 7 pixels
// gives the 4 outputs that (1, 1) gives.
// CHECK-LABEL: func.func @extra_never_read
// CHECK-NOT:     torch.aten.constant_pad_nd
// CHECK:         torch.aten.convolution %arg0, %arg1
// CHECK-SAME:      -> !torch.vtensor<[1,8,4,4],f32>
func.func @extra_never_read(%x: !torch.vtensor<[1,8,7,7],f32>, %w: !torch.vtensor<[8,1,3,3],f32>) -> !torch.vtensor<[1,8,4,4],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %zero = torch.constant.int 0
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int8 = torch.constant.int 8
  %pads = torch.prim.ListConstruct %int1, %int2, %int1, %int2 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %x, %pads, %zero : !torch.vtensor<[1,8,7,7],f32>, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,10,10],f32>
  %twos = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %y = torch.aten.convolution %padded, %w, %none, %twos, %zeros, %ones, %false, %zeros, %int8 : !torch.vtensor<[1,8,10,10],f32>, !torch.vtensor<[8,1,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,4,4],f32>
  return %y : !torch.vtensor<[1,8,4,4],f32>
}

// -----

// Must not fire: (0, 1) at stride 2 reads its extra row (no symmetric padding gives 56 outputs of 112),
// a fill that is not zero, and a pad of the channels.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: torch.aten.constant_pad_nd
func.func @kept(%x: !torch.vtensor<[1,8,112,112],f32>, %w: !torch.vtensor<[8,1,3,3],f32>, %v: !torch.vtensor<[8,10,3,3],f32>) -> (!torch.vtensor<[1,8,56,56],f32>, !torch.vtensor<[1,8,112,112],f32>, !torch.vtensor<[1,8,110,110],f32>) {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %zero = torch.constant.float 0.000000e+00
  %one = torch.constant.float 1.000000e+00
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int8 = torch.constant.int 8
  %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %twos = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %after = torch.prim.ListConstruct %int0, %int1, %int0, %int1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %p1 = torch.aten.constant_pad_nd %x, %after, %zero : !torch.vtensor<[1,8,112,112],f32>, !torch.list<int>, !torch.float -> !torch.vtensor<[1,8,113,113],f32>
  %y1 = torch.aten.convolution %p1, %w, %none, %twos, %zeros, %ones, %false, %zeros, %int8 : !torch.vtensor<[1,8,113,113],f32>, !torch.vtensor<[8,1,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,56,56],f32>
  %both = torch.prim.ListConstruct %int1, %int1, %int1, %int1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %p2 = torch.aten.constant_pad_nd %x, %both, %one : !torch.vtensor<[1,8,112,112],f32>, !torch.list<int>, !torch.float -> !torch.vtensor<[1,8,114,114],f32>
  %y2 = torch.aten.convolution %p2, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int8 : !torch.vtensor<[1,8,114,114],f32>, !torch.vtensor<[8,1,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,112,112],f32>
  %channels = torch.prim.ListConstruct %int0, %int0, %int0, %int0, %int1, %int1 : (!torch.int, !torch.int, !torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %p3 = torch.aten.constant_pad_nd %x, %channels, %zero : !torch.vtensor<[1,8,112,112],f32>, !torch.list<int>, !torch.float -> !torch.vtensor<[1,10,112,112],f32>
  %y3 = torch.aten.convolution %p3, %v, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,10,112,112],f32>, !torch.vtensor<[8,10,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,110,110],f32>
  return %y1, %y2, %y3 : !torch.vtensor<[1,8,56,56],f32>, !torch.vtensor<[1,8,112,112],f32>, !torch.vtensor<[1,8,110,110],f32>
}
