// RUN: kiln opt %s --pass fold-neg-neg --split-input-file | filecheck %s

// -(-x) is x, also with a dynamic shape; -(-(-x)) keeps one neg.
// CHECK-LABEL: func.func @double_and_triple
// CHECK-NEXT:    %[[NEG:.*]] = torch.aten.neg %arg0
// CHECK-NEXT:    return %arg0, %[[NEG]]
func.func @double_and_triple(%x: !torch.vtensor<[?,4],f32>) -> (!torch.vtensor<[?,4],f32>, !torch.vtensor<[?,4],f32>) {
  %a = torch.aten.neg %x : !torch.vtensor<[?,4],f32> -> !torch.vtensor<[?,4],f32>
  %b = torch.aten.neg %a : !torch.vtensor<[?,4],f32> -> !torch.vtensor<[?,4],f32>
  %c = torch.aten.neg %b : !torch.vtensor<[?,4],f32> -> !torch.vtensor<[?,4],f32>
  return %b, %c : !torch.vtensor<[?,4],f32>, !torch.vtensor<[?,4],f32>
}

// -----

// Must not fire: a single neg, and neg of abs.
// CHECK-LABEL: func.func @single_neg
// CHECK:         torch.aten.neg %arg0
// CHECK:         torch.aten.abs
// CHECK:         torch.aten.neg
func.func @single_neg(%x: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) {
  %a = torch.aten.neg %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %b = torch.aten.abs %a : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %c = torch.aten.neg %b : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %a, %c : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}
