// RUN: not kiln opt %s --pass check-static-shapes --split-input-file 2>&1 | filecheck %s

// Fixed shapes, and a dynamic batch from the inputs: passes through unchanged.
// CHECK-LABEL: func.func @fixed
// CHECK:         torch.aten.index.Tensor %arg0
func.func @fixed(%x: !torch.vtensor<[5,3],f32>, %i: !torch.vtensor<[4],si64>) -> !torch.vtensor<[4,3],f32> {
  %list = torch.prim.ListConstruct %i : (!torch.vtensor<[4],si64>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %x, %list : !torch.vtensor<[5,3],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[4,3],f32>
  return %0 : !torch.vtensor<[4,3],f32>
}

// -----

// CHECK-LABEL: func.func @dynamic_batch
// CHECK:         torch.aten.relu %arg0
func.func @dynamic_batch(%x: !torch.vtensor<[?,3],f32>) -> !torch.vtensor<[?,3],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[?,3],f32> -> !torch.vtensor<[?,3],f32>
  return %0 : !torch.vtensor<[?,3],f32>
}

// -----

// x[mask]: named, whatever the shapes.
// CHECK: error: [check-static-shapes] {{.*}}: 'torch.aten.index.Tensor' op indexes with a boolean mask: the result's size is the number of True values; kiln compiles programs whose shapes are fixed by the inputs'
func.func @mask(%x: !torch.vtensor<[?,5],f32>, %m: !torch.vtensor<[?,5],i1>) -> !torch.vtensor<[?],f32> {
  %list = torch.prim.ListConstruct %m : (!torch.vtensor<[?,5],i1>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %x, %list : !torch.vtensor<[?,5],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[?],f32>
  return %0 : !torch.vtensor<[?],f32>
}

// -----

// CHECK: error: [check-static-shapes] {{.*}}: 'torch.aten.nonzero' op makes a tensor whose size depends on its input's values
func.func @nonzero(%x: !torch.vtensor<[3,5],i1>) -> !torch.vtensor<[?,2],si64> {
  %0 = torch.aten.nonzero %x : !torch.vtensor<[3,5],i1> -> !torch.vtensor<[?,2],si64>
  return %0 : !torch.vtensor<[?,2],si64>
}

// -----

// Any other op making a size that static inputs do not fix.
// CHECK: error: [check-static-shapes] {{.*}}: 'torch.aten.repeat_interleave.Tensor' op has a result whose size depends on tensor values, not on the input shapes
func.func @repeats(%r: !torch.vtensor<[3],si64>) -> !torch.vtensor<[?],si64> {
  %none = torch.constant.none
  %0 = torch.aten.repeat_interleave.Tensor %r, %none : !torch.vtensor<[3],si64>, !torch.none -> !torch.vtensor<[?],si64>
  return %0 : !torch.vtensor<[?],si64>
}
