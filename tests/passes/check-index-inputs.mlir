// RUN: kiln opt %s --pass check-index-inputs --split-input-file | filecheck %s

// An embedding of the input ids: every id is checked against the table's 10 rows, before the lookup.
// CHECK-LABEL: func.func @embedding
// CHECK:         %[[ROWS:.*]] = torch.constant.int 10
// CHECK:         %[[ZERO:.*]] = torch.constant.int 0
// CHECK:         %[[GE:.*]] = torch.aten.ge.Scalar %arg1, %[[ZERO]]
// CHECK:         %[[LT:.*]] = torch.aten.lt.Scalar %arg1, %[[ROWS]]
// CHECK:         %[[AND:.*]] = torch.aten.bitwise_and.Tensor %[[GE]], %[[LT]]
// CHECK:         %[[ALL:.*]] = torch.aten.all %[[AND]] : !torch.vtensor<[3],i1> -> !torch.vtensor<[],i1>
// CHECK:         %[[OK:.*]] = torch.aten.Bool.Tensor %[[ALL]]
// CHECK:         torch.runtime.assert %[[OK]], "embedding: input 'argument 1' holds an index outside [0, 10), the range it may index"
// CHECK:         torch.aten.embedding %arg0, %arg1
func.func @embedding(%table: !torch.vtensor<[10,4],f32>, %ids: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3,4],f32> {
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %0 = torch.aten.embedding %table, %ids, %int-1, %false, %false : !torch.vtensor<[10,4],f32>, !torch.vtensor<[3],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[3,4],f32>
  return %0 : !torch.vtensor<[3,4],f32>
}

// -----

// x[idx] wraps negative indices, so [-5, 5) is in range; the size of a dynamic dimension is read at run time.
// CHECK-LABEL: func.func @advanced_index
// CHECK:         %[[SIZE:.*]] = torch.aten.size.int %arg0, %{{.*}}
// CHECK:         %[[LOW:.*]] = torch.aten.neg.int %[[SIZE]]
// CHECK:         torch.aten.ge.Scalar %arg1, %[[LOW]]
// CHECK:         torch.aten.lt.Scalar %arg1, %[[SIZE]]
// CHECK:         torch.runtime.assert %{{.*}}, "index.Tensor: input 'argument 1' holds an index outside [-the size of dimension 0, the size of dimension 0), the range it may index"
func.func @advanced_index(%x: !torch.vtensor<[?,3],f32>, %i: !torch.vtensor<[4],si64>) -> !torch.vtensor<[4,3],f32> {
  %list = torch.prim.ListConstruct %i : (!torch.vtensor<[4],si64>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %x, %list : !torch.vtensor<[?,3],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[4,3],f32>
  return %0 : !torch.vtensor<[4,3],f32>
}

// -----

// A gather along dimension 1 through a view of the input: checked against that dimension's 6, once
// though two ops read the same index the same way.
// CHECK-LABEL: func.func @gather_twice
// CHECK-COUNT-1: torch.runtime.assert %{{.*}}, "gather: input 'argument 1' holds an index outside [0, 6), the range it may index"
// CHECK-NOT:     torch.runtime.assert
func.func @gather_twice(%x: !torch.vtensor<[2,6],f32>, %i: !torch.vtensor<[4],si64>) -> !torch.vtensor<[2,2],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %shape = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %v = torch.aten.view %i, %shape : !torch.vtensor<[4],si64>, !torch.list<int> -> !torch.vtensor<[2,2],si64>
  %0 = torch.aten.gather %x, %int1, %v, %false : !torch.vtensor<[2,6],f32>, !torch.int, !torch.vtensor<[2,2],si64>, !torch.bool -> !torch.vtensor<[2,2],f32>
  %1 = torch.aten.gather %x, %int1, %v, %false : !torch.vtensor<[2,6],f32>, !torch.int, !torch.vtensor<[2,2],si64>, !torch.bool -> !torch.vtensor<[2,2],f32>
  %2 = torch.aten.add.Tensor %0, %1, %int1 : !torch.vtensor<[2,2],f32>, !torch.vtensor<[2,2],f32>, !torch.int -> !torch.vtensor<[2,2],f32>
  return %2 : !torch.vtensor<[2,2],f32>
}

// -----

// Must not fire: an index the model computes (positions from arange) is in range by construction.
// CHECK-LABEL: func.func @computed_index
// CHECK-NOT:     torch.runtime.assert
func.func @computed_index(%table: !torch.vtensor<[10,4],f32>) -> !torch.vtensor<[3,4],f32> {
  %int0 = torch.constant.int 0
  %int3 = torch.constant.int 3
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  %none = torch.constant.none
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %ids = torch.aten.arange.start_step %int0, %int3, %int1, %int4, %none, %none, %none : !torch.int, !torch.int, !torch.int, !torch.int, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[3],si64>
  %0 = torch.aten.embedding %table, %ids, %int-1, %false, %false : !torch.vtensor<[10,4],f32>, !torch.vtensor<[3],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[3,4],f32>
  return %0 : !torch.vtensor<[3,4],f32>
}

// -----

// A --generate artifact's functions are left unchecked: decode's token is its previous call's
// output, and the runtime checks a prompt on the host before prefill takes it. A check would make
// the host wait for the device in the middle of every step. Other functions are still checked.
// CHECK-LABEL: func.func @decode
// CHECK-NOT:     torch.runtime.assert
// CHECK:         torch.aten.embedding %arg0, %arg1
// CHECK-LABEL: func.func @main
// CHECK:         torch.runtime.assert
// CHECK:         torch.aten.embedding %arg0, %arg1
module attributes {kiln.calling_convention = "{\"functions\": [], \"generation\": {\"prefill\": \"prefill\", \"decode\": \"decode\"}}"} {
  func.func @decode(%table: !torch.vtensor<[10,4],f32>, %ids: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3,4],f32> {
    %int-1 = torch.constant.int -1
    %false = torch.constant.bool false
    %0 = torch.aten.embedding %table, %ids, %int-1, %false, %false : !torch.vtensor<[10,4],f32>, !torch.vtensor<[3],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[3,4],f32>
    return %0 : !torch.vtensor<[3,4],f32>
  }
  func.func @main(%table: !torch.vtensor<[10,4],f32>, %ids: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3,4],f32> {
    %int-1 = torch.constant.int -1
    %false = torch.constant.bool false
    %0 = torch.aten.embedding %table, %ids, %int-1, %false, %false : !torch.vtensor<[10,4],f32>, !torch.vtensor<[3],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[3,4],f32>
    return %0 : !torch.vtensor<[3,4],f32>
  }
}
