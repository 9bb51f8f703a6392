// RUN: kiln opt %s --pass fold-relu-relu --split-input-file | filecheck %s

// relu(relu(x)) is relu(x).
// CHECK-LABEL: func.func @relu_twice
// CHECK-NEXT:    %[[RELU:.*]] = torch.aten.relu %arg0
// CHECK-NEXT:    return %[[RELU]]
func.func @relu_twice(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %a = torch.aten.relu %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %b = torch.aten.relu %a : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %b : !torch.vtensor<[4],f32>
}

// -----

// Must not fire: relu(neg(relu(x))) has no relu directly inside a relu.
// CHECK-LABEL: func.func @relu_neg_relu
// CHECK-COUNT-2: torch.aten.relu
func.func @relu_neg_relu(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %a = torch.aten.relu %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %b = torch.aten.neg %a : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %c = torch.aten.relu %b : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %c : !torch.vtensor<[4],f32>
}
