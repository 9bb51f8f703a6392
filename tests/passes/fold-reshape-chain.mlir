// RUN: kiln opt %s --pass fold-reshape-chain --split-input-file | filecheck %s

// view -> unsqueeze -> view: one view of x to the last shape.
// CHECK-LABEL: func.func @three_reshapes
// CHECK:         %[[SHAPE:.*]] = torch.prim.ListConstruct %{{.*}}, %{{.*}} : (!torch.int, !torch.int) -> !torch.list<int>
// CHECK-NEXT:    %[[V:.*]] = torch.aten.view %arg0, %[[SHAPE]] : !torch.vtensor<[2,3,4],f32>, !torch.list<int> -> !torch.vtensor<[4,6],f32>
// CHECK-NEXT:    return %[[V]]
func.func @three_reshapes(%x: !torch.vtensor<[2,3,4],f32>) -> !torch.vtensor<[4,6],f32> {
  %int0 = torch.constant.int 0
  %int4 = torch.constant.int 4
  %int6 = torch.constant.int 6
  %int24 = torch.constant.int 24
  %flat = torch.prim.ListConstruct %int24 : (!torch.int) -> !torch.list<int>
  %a = torch.aten.view %x, %flat : !torch.vtensor<[2,3,4],f32>, !torch.list<int> -> !torch.vtensor<[24],f32>
  %b = torch.aten.unsqueeze %a, %int0 : !torch.vtensor<[24],f32>, !torch.int -> !torch.vtensor<[1,24],f32>
  %shape = torch.prim.ListConstruct %int4, %int6 : (!torch.int, !torch.int) -> !torch.list<int>
  %c = torch.aten.view %b, %shape : !torch.vtensor<[1,24],f32>, !torch.list<int> -> !torch.vtensor<[4,6],f32>
  return %c : !torch.vtensor<[4,6],f32>
}

// -----

// unsqueeze then squeeze.dim: back to x's shape, so x itself.
// CHECK-LABEL: func.func @round_trip
// CHECK-NOT:     torch.aten.unsqueeze
// CHECK-NOT:     torch.aten.squeeze
// CHECK:         return %arg0
func.func @round_trip(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %int1 = torch.constant.int 1
  %a = torch.aten.unsqueeze %x, %int1 : !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,1,3],f32>
  %b = torch.aten.squeeze.dim %a, %int1 : !torch.vtensor<[2,1,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  return %b : !torch.vtensor<[2,3],f32>
}

// -----

// Must not fire: a single reshape, and a chain whose result has a dynamic size (no static view
// to write, and a `?` that matches x's type need not be x's shape).
// CHECK-LABEL: func.func @single_and_dynamic
// CHECK:         torch.aten.view %arg0
// CHECK:         torch.aten.view %arg1
// CHECK:         torch.aten.view
func.func @single_and_dynamic(%x: !torch.vtensor<[2,3],f32>, %d: !torch.vtensor<[?,4],f32>, %n: !torch.int) -> (!torch.vtensor<[6],f32>, !torch.vtensor<[?,4],f32>) {
  %int6 = torch.constant.int 6
  %int4 = torch.constant.int 4
  %intm1 = torch.constant.int -1
  %flat = torch.prim.ListConstruct %int6 : (!torch.int) -> !torch.list<int>
  %a = torch.aten.view %x, %flat : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[6],f32>
  %s1 = torch.prim.ListConstruct %n, %intm1 : (!torch.int, !torch.int) -> !torch.list<int>
  %b = torch.aten.view %d, %s1 : !torch.vtensor<[?,4],f32>, !torch.list<int> -> !torch.vtensor<[?,?],f32>
  %s2 = torch.prim.ListConstruct %intm1, %int4 : (!torch.int, !torch.int) -> !torch.list<int>
  %c = torch.aten.view %b, %s2 : !torch.vtensor<[?,?],f32>, !torch.list<int> -> !torch.vtensor<[?,4],f32>
  return %a, %c : !torch.vtensor<[6],f32>, !torch.vtensor<[?,4],f32>
}
