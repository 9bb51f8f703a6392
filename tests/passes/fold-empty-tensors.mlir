// RUN: kiln opt %s --pass fold-empty-tensors --split-input-file | filecheck %s

// x.repeat(0, 2): a broadcast to zero rows, then views of it (one with a -1 that torch-to-linalg
// would divide by zero to infer). Each op whose result is empty becomes an empty literal; the
// unsqueezes of the non-empty input stay.
// CHECK-LABEL: func.func @repeat_zero
// CHECK:         torch.aten.unsqueeze
// CHECK-NOT:     torch.aten.broadcast_to
// CHECK-NOT:     torch.aten.view
// CHECK:         %[[EMPTY:.*]] = torch.vtensor.literal(dense<> : tensor<0x10xf32>) : !torch.vtensor<[0,10],f32>
// CHECK:         return %[[EMPTY]]
func.func @repeat_zero(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[0,10],f32> {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int5 = torch.constant.int 5
  %0 = torch.aten.unsqueeze %x, %int0 : !torch.vtensor<[3,5],f32>, !torch.int -> !torch.vtensor<[1,3,5],f32>
  %1 = torch.aten.unsqueeze %0, %int2 : !torch.vtensor<[1,3,5],f32>, !torch.int -> !torch.vtensor<[1,3,1,5],f32>
  %2 = torch.prim.ListConstruct %int0, %int3, %int2, %int5 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %3 = torch.aten.broadcast_to %1, %2 : !torch.vtensor<[1,3,1,5],f32>, !torch.list<int> -> !torch.vtensor<[0,3,2,5],f32>
  %4 = torch.prim.ListConstruct %int0, %int-1 : (!torch.int, !torch.int) -> !torch.list<int>
  %5 = torch.aten.view %3, %4 : !torch.vtensor<[0,3,2,5],f32>, !torch.list<int> -> !torch.vtensor<[0,10],f32>
  return %5 : !torch.vtensor<[0,10],f32>
}

// -----

// Integer and bool results too, each with its own element type.
// CHECK-LABEL: func.func @empty_indices
// CHECK:         torch.vtensor.literal(dense<> : tensor<2x0xsi64>) : !torch.vtensor<[2,0],si64>
// CHECK:         torch.vtensor.literal(dense<> : tensor<2x0xi1>) : !torch.vtensor<[2,0],i1>
func.func @empty_indices(%x: !torch.vtensor<[2,4],si64>) -> (!torch.vtensor<[2,0],si64>, !torch.vtensor<[2,0],i1>) {
  %int1 = torch.constant.int 1
  %int0 = torch.constant.int 0
  %a = torch.aten.slice.Tensor %x, %int1, %int0, %int0, %int1 : !torch.vtensor<[2,4],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,0],si64>
  %b = torch.aten.gt.Scalar %a, %int0 : !torch.vtensor<[2,0],si64>, !torch.int -> !torch.vtensor<[2,0],i1>
  return %a, %b : !torch.vtensor<[2,0],si64>, !torch.vtensor<[2,0],i1>
}

// -----

// Must not fire: a reduction over an empty dimension has elements (zeros), and so does a dynamic shape.
// CHECK-LABEL: func.func @not_empty
// CHECK:         torch.aten.sum.dim_IntList
// CHECK:         torch.aten.neg
func.func @not_empty(%x: !torch.vtensor<[3,0],f32>, %y: !torch.vtensor<[?,0],f32>) -> (!torch.vtensor<[3],f32>, !torch.vtensor<[?,0],f32>) {
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %false = torch.constant.bool false
  %none = torch.constant.none
  %sum = torch.aten.sum.dim_IntList %x, %dims, %false, %none : !torch.vtensor<[3,0],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],f32>
  %neg = torch.aten.neg %y : !torch.vtensor<[?,0],f32> -> !torch.vtensor<[?,0],f32>
  return %sum, %neg : !torch.vtensor<[3],f32>, !torch.vtensor<[?,0],f32>
}
