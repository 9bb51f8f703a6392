// RUN: kiln opt %s --pass split-spatial-sum --split-input-file | filecheck %s

// Squeeze-excitation's average over 64 x 64 pixels: summed over the width, then over the height.
// CHECK-LABEL: func.func @average_over_pixels
// CHECK:         %[[WIDTH:.*]] = torch.prim.ListConstruct %{{.*}} : (!torch.int) -> !torch.list<int>
// CHECK:         %[[ROWS:.*]] = torch.aten.sum.dim_IntList %arg0, %[[WIDTH]], %{{.*}}, %none : !torch.vtensor<[2,16,64,64],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,16,64,1],f32>
// CHECK:         %[[BOTH:.*]] = torch.prim.ListConstruct %{{.*}}, %{{.*}} : (!torch.int, !torch.int) -> !torch.list<int>
// CHECK:         %[[SUM:.*]] = torch.aten.sum.dim_IntList %[[ROWS]], %[[BOTH]], %true, %none : !torch.vtensor<[2,16,64,1],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,16,1,1],f32>
// CHECK:         torch.aten.div.Scalar %[[SUM]]
func.func @average_over_pixels(%x: !torch.vtensor<[2,16,64,64],f32>) -> !torch.vtensor<[2,16,1,1],f32> {
  %none = torch.constant.none
  %true = torch.constant.bool true
  %int-1 = torch.constant.int -1
  %int-2 = torch.constant.int -2
  %int4096 = torch.constant.int 4096
  %dims = torch.prim.ListConstruct %int-1, %int-2 : (!torch.int, !torch.int) -> !torch.list<int>
  %sum = torch.aten.sum.dim_IntList %x, %dims, %true, %none : !torch.vtensor<[2,16,64,64],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,16,1,1],f32>
  %mean = torch.aten.div.Scalar %sum, %int4096 : !torch.vtensor<[2,16,1,1],f32>, !torch.int -> !torch.vtensor<[2,16,1,1],f32>
  return %mean : !torch.vtensor<[2,16,1,1],f32>
}

// -----

// Dims named from the front, without keepdim, and the sum's dtype (bf16 summed as f32) kept on its first step.
// CHECK-LABEL: func.func @dims_from_the_front
// CHECK:         %[[ROWS:.*]] = torch.aten.sum.dim_IntList %arg0, %{{.*}}, %{{.*}}, %int6 : !torch.vtensor<[1,8,48,32],bf16>, !torch.list<int>, !torch.bool, !torch.int -> !torch.vtensor<[1,8,48,1],f32>
// CHECK:         %[[SUM:.*]] = torch.aten.sum.dim_IntList %[[ROWS]], %{{.*}}, %false, %none : !torch.vtensor<[1,8,48,1],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,8],f32>
// CHECK-NEXT:    return %[[SUM]]
func.func @dims_from_the_front(%x: !torch.vtensor<[1,8,48,32],bf16>) -> !torch.vtensor<[1,8],f32> {
  %false = torch.constant.bool false
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int6 = torch.constant.int 6
  %dims = torch.prim.ListConstruct %int2, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %sum = torch.aten.sum.dim_IntList %x, %dims, %false, %int6 : !torch.vtensor<[1,8,48,32],bf16>, !torch.list<int>, !torch.bool, !torch.int -> !torch.vtensor<[1,8],f32>
  return %sum : !torch.vtensor<[1,8],f32>
}

// -----

// Kept: a network's final pooling over 7 x 7 (short rows), a sum over the channels and the height, and one row of pixels.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: torch.aten.sum.dim_IntList %arg
// CHECK-NOT:     torch.aten.sum.dim_IntList
func.func @kept(%x: !torch.vtensor<[1,2048,7,7],f32>, %y: !torch.vtensor<[1,64,64,64],f32>, %z: !torch.vtensor<[1,8,1,4096],f32>) -> (!torch.vtensor<[1,2048,1,1],f32>, !torch.vtensor<[1,1,1,64],f32>, !torch.vtensor<[1,8,1,1],f32>) {
  %none = torch.constant.none
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %spatial = torch.prim.ListConstruct %int2, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %channels = torch.prim.ListConstruct %int1, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %a = torch.aten.sum.dim_IntList %x, %spatial, %true, %none : !torch.vtensor<[1,2048,7,7],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,2048,1,1],f32>
  %b = torch.aten.sum.dim_IntList %y, %channels, %true, %none : !torch.vtensor<[1,64,64,64],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,1,1,64],f32>
  %c = torch.aten.sum.dim_IntList %z, %spatial, %true, %none : !torch.vtensor<[1,8,1,4096],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,8,1,1],f32>
  return %a, %b, %c : !torch.vtensor<[1,2048,1,1],f32>, !torch.vtensor<[1,1,1,64],f32>, !torch.vtensor<[1,8,1,1],f32>
}
