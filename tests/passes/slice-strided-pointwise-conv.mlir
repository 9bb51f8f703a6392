// RUN: kiln opt %s --pass slice-strided-pointwise-conv --split-input-file | filecheck %s

// A 1x1 convolution with stride 2: the pixels it reads are sliced out first, then a stride-1 convolution.
// CHECK-LABEL: func.func @strided_pointwise
// CHECK:         %[[H:.*]] = torch.aten.slice.Tensor %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : {{.*}} -> !torch.vtensor<[1,8,3,7],f32>
// CHECK:         %[[HW:.*]] = torch.aten.slice.Tensor %[[H]], {{.*}} -> !torch.vtensor<[1,8,3,4],f32>
// CHECK:         %[[ONES:.*]] = torch.prim.ListConstruct %[[ONE:.*]], %[[ONE]] : (!torch.int, !torch.int) -> !torch.list<int>
// CHECK:         %[[Y:.*]] = torch.aten.convolution %[[HW]], %arg1, %none, %[[ONES]],
// CHECK-SAME:      -> !torch.vtensor<[1,16,3,4],f32>
// CHECK-NEXT:    return %[[Y]]
func.func @strided_pointwise(%x: !torch.vtensor<[1,8,6,7],f32>, %w: !torch.vtensor<[16,8,1,1],f32>) -> !torch.vtensor<[1,16,3,4],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %y = torch.aten.convolution %x, %w, %none, %stride, %padding, %dilation, %false, %padding, %int1 : !torch.vtensor<[1,8,6,7],f32>, !torch.vtensor<[16,8,1,1],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,3,4],f32>
  return %y : !torch.vtensor<[1,16,3,4],f32>
}

// -----

// Must not fire: a 3x3 kernel reads every pixel, and a padded 1x1 convolution reads padding.
// CHECK-LABEL: func.func @not_pointwise
// CHECK-NOT:     torch.aten.slice.Tensor
// CHECK:         torch.aten.convolution %arg0, %arg1
// CHECK:         torch.aten.convolution %arg0, %arg2
func.func @not_pointwise(%x: !torch.vtensor<[1,8,6,6],f32>, %w3: !torch.vtensor<[16,8,3,3],f32>, %w1: !torch.vtensor<[16,8,1,1],f32>) -> (!torch.vtensor<[1,16,3,3],f32>, !torch.vtensor<[1,16,4,4],f32>) {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %pad1 = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %pad0 = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %a = torch.aten.convolution %x, %w3, %none, %stride, %pad1, %dilation, %false, %pad0, %int1 : !torch.vtensor<[1,8,6,6],f32>, !torch.vtensor<[16,8,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,3,3],f32>
  %b = torch.aten.convolution %x, %w1, %none, %stride, %pad1, %dilation, %false, %pad0, %int1 : !torch.vtensor<[1,8,6,6],f32>, !torch.vtensor<[16,8,1,1],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,16,4,4],f32>
  return %a, %b : !torch.vtensor<[1,16,3,3],f32>, !torch.vtensor<[1,16,4,4],f32>
}
