// RUN: kiln opt %s --pass check-index-inputs --split-input-file | filecheck %s

// An embedding of the input ids only reads: the lookup reads a safe index (0 where an id is out of
// range) and the check that every id is below the table's 10 rows is asserted at the return, so the
// host issues the whole call before it waits for the flag.
// CHECK-LABEL: func.func @embedding
// CHECK:         %[[ROWS:.*]] = torch.constant.int 10
// CHECK:         %[[ZERO:.*]] = torch.constant.int 0
// CHECK:         %[[GE:.*]] = torch.aten.ge.Scalar %arg1, %[[ZERO]]
// CHECK:         %[[LT:.*]] = torch.aten.lt.Scalar %arg1, %[[ROWS]]
// CHECK:         %[[AND:.*]] = torch.aten.bitwise_and.Tensor %[[GE]], %[[LT]]
// CHECK:         %[[ALL:.*]] = torch.aten.all %[[AND]] : !torch.vtensor<[3],i1> -> !torch.vtensor<[],i1>
// CHECK-NOT:     torch.runtime.assert
// CHECK:         %[[SAFE:.*]] = torch.aten.where.self %[[AND]], %arg1, %{{.*}} : !torch.vtensor<[3],i1>, !torch.vtensor<[3],si64>, !torch.vtensor<[],si64> -> !torch.vtensor<[3],si64>
// CHECK:         %[[LOOKUP:.*]] = torch.aten.embedding %arg0, %[[SAFE]]
// CHECK:         %[[OK:.*]] = torch.aten.Bool.Tensor %[[ALL]]
// CHECK:         torch.runtime.assert %[[OK]], "embedding: input 'argument 1' holds an index outside [0, 10), the range it may index"
// CHECK-NEXT:    return %[[LOOKUP]]
func.func @embedding(%table: !torch.vtensor<[10,4],f32>, %ids: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3,4],f32> {
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %0 = torch.aten.embedding %table, %ids, %int-1, %false, %false : !torch.vtensor<[10,4],f32>, !torch.vtensor<[3],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[3,4],f32>
  return %0 : !torch.vtensor<[3,4],f32>
}

// -----

// x[idx] wraps negative indices, so [-5, 5) is in range; the size of a dynamic dimension is read at
// run time, and as it may be 0, no index is safe: the assert stays before the op.
// CHECK-LABEL: func.func @advanced_index
// CHECK:         %[[SIZE:.*]] = torch.aten.size.int %arg0, %{{.*}}
// CHECK:         %[[LOW:.*]] = torch.aten.neg.int %[[SIZE]]
// CHECK:         torch.aten.ge.Scalar %arg1, %[[LOW]]
// CHECK:         torch.aten.lt.Scalar %arg1, %[[SIZE]]
// CHECK:         torch.runtime.assert %{{.*}}, "index.Tensor: input 'argument 1' holds an index outside [-the size of dimension 0, the size of dimension 0), the range it may index"
// CHECK-NEXT:    torch.aten.index.Tensor %arg0, %0
func.func @advanced_index(%x: !torch.vtensor<[?,3],f32>, %i: !torch.vtensor<[4],si64>) -> !torch.vtensor<[4,3],f32> {
  %list = torch.prim.ListConstruct %i : (!torch.vtensor<[4],si64>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %x, %list : !torch.vtensor<[?,3],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[4,3],f32>
  return %0 : !torch.vtensor<[4,3],f32>
}

// -----

// A gather along dimension 1 through a view of the input: checked against that dimension's 6, once
// though two ops read the same index the same way, and both read the safe index.
// CHECK-LABEL: func.func @gather_twice
// CHECK:         %[[SAFE:.*]] = torch.aten.where.self
// CHECK:         torch.aten.gather %arg0, %{{.*}}, %[[SAFE]]
// CHECK:         torch.aten.gather %arg0, %{{.*}}, %[[SAFE]]
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
// CHECK:         torch.aten.embedding %arg0, %{{.*}}
// CHECK:         torch.runtime.assert
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

// -----

// A scatter writes where its index points: its check stays before it. 4,096 ids are checked a row
// of 64 at a time first (IREE reduces a whole integer tensor on one GPU thread).
// CHECK-LABEL: func.func @scatter_many
// CHECK:         %[[AND:.*]] = torch.aten.bitwise_and.Tensor
// CHECK:         %[[GRID:.*]] = torch.aten.view %[[AND]], %{{.*}} : !torch.vtensor<[8,512],i1>, !torch.list<int> -> !torch.vtensor<[64,64],i1>
// CHECK:         %[[ROWS:.*]] = torch.aten.all.dim %[[GRID]], %{{.*}}, %{{.*}} : !torch.vtensor<[64,64],i1>, !torch.int, !torch.bool -> !torch.vtensor<[64],i1>
// CHECK:         %[[ALL:.*]] = torch.aten.all %[[ROWS]]
// CHECK:         %[[OK:.*]] = torch.aten.Bool.Tensor %[[ALL]]
// CHECK:         torch.runtime.assert %[[OK]], "scatter.src: input 'argument 1' holds an index outside [0, 16), the range it may index"
// CHECK-NEXT:    torch.aten.scatter.src %arg0, %{{.*}}, %arg1, %arg2
func.func @scatter_many(%x: !torch.vtensor<[8,16],f32>, %i: !torch.vtensor<[8,512],si64>, %src: !torch.vtensor<[8,512],f32>) -> !torch.vtensor<[8,16],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.aten.scatter.src %x, %int1, %i, %src : !torch.vtensor<[8,16],f32>, !torch.int, !torch.vtensor<[8,512],si64>, !torch.vtensor<[8,512],f32> -> !torch.vtensor<[8,16],f32>
  return %0 : !torch.vtensor<[8,16],f32>
}

// -----

// One list of indices read by two ops of different sizes: each op reads safe indices of its own
// (a list of its own), so neither reads the other's.
// CHECK-LABEL: func.func @shared_index_list
// CHECK:         %[[SAFE_X:.*]] = torch.aten.where.self {{.*}} -> !torch.vtensor<[4],si64>
// CHECK:         %[[LIST_X:.*]] = torch.prim.ListConstruct %[[SAFE_X]]
// CHECK:         torch.aten.index.Tensor %arg0, %[[LIST_X]]
// CHECK:         %[[SAFE_Y:.*]] = torch.aten.where.self {{.*}} -> !torch.vtensor<[4],si64>
// CHECK:         %[[LIST_Y:.*]] = torch.prim.ListConstruct %[[SAFE_Y]]
// CHECK:         torch.aten.index.Tensor %arg1, %[[LIST_Y]]
// CHECK:         torch.runtime.assert %{{.*}}, "index.Tensor: input 'argument 2' holds an index outside [-10, 10), the range it may index"
// CHECK:         torch.runtime.assert %{{.*}}, "index.Tensor: input 'argument 2' holds an index outside [-5, 5), the range it may index"
// CHECK-NEXT:    return
func.func @shared_index_list(%x: !torch.vtensor<[10,3],f32>, %y: !torch.vtensor<[5,3],f32>, %i: !torch.vtensor<[4],si64>) -> (!torch.vtensor<[4,3],f32>, !torch.vtensor<[4,3],f32>) {
  %list = torch.prim.ListConstruct %i : (!torch.vtensor<[4],si64>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %x, %list : !torch.vtensor<[10,3],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[4,3],f32>
  %1 = torch.aten.index.Tensor %y, %list : !torch.vtensor<[5,3],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[4,3],f32>
  return %0, %1 : !torch.vtensor<[4,3],f32>, !torch.vtensor<[4,3],f32>
}
