// RUN: kiln opt %s --pass decompose-slice-scatter --split-input-file | filecheck %s

// Step 1: the kept parts around `src`, concatenated.
// CHECK-LABEL: func.func @step_one
// CHECK:         %[[BEFORE:.*]] = torch.aten.slice.Tensor %arg0, %int1, %int0, %int1, %int1 : {{.*}} -> !torch.vtensor<[3,1],f32>
// CHECK:         %[[AFTER:.*]] = torch.aten.slice.Tensor %arg0, %int1, %int3, %int6, %int1 : {{.*}} -> !torch.vtensor<[3,3],f32>
// CHECK:         %[[PARTS:.*]] = torch.prim.ListConstruct %[[BEFORE]], %arg1, %[[AFTER]]
// CHECK:         %[[Y:.*]] = torch.aten.cat %[[PARTS]], %int1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[3,6],f32>
// CHECK:         return %[[Y]]
func.func @step_one(%x: !torch.vtensor<[3,6],f32>, %s: !torch.vtensor<[3,2],f32>) -> !torch.vtensor<[3,6],f32> {
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %0 = torch.aten.slice_scatter %x, %s, %int1, %int1, %int3, %int1 : !torch.vtensor<[3,6],f32>, !torch.vtensor<[3,2],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[3,6],f32>
  return %0 : !torch.vtensor<[3,6],f32>
}

// -----

// Step 2: a scatter of `src` at the slice's columns, 1 and 3, as literal indices.
// CHECK-LABEL: func.func @strided
// CHECK:         %[[INDEX:.*]] = torch.vtensor.literal(dense<{{\[}}[1, 3], [1, 3], [1, 3]]> : tensor<3x2xsi64>)
// CHECK:         %[[Y:.*]] = torch.aten.scatter.src %arg0, %int1, %[[INDEX]], %arg1
// CHECK:         return %[[Y]]
func.func @strided(%x: !torch.vtensor<[3,6],f32>, %s: !torch.vtensor<[3,2],f32>) -> !torch.vtensor<[3,6],f32> {
  %int1 = torch.constant.int 1
  %int5 = torch.constant.int 5
  %int2 = torch.constant.int 2
  %0 = torch.aten.slice_scatter %x, %s, %int1, %int1, %int5, %int2 : !torch.vtensor<[3,6],f32>, !torch.vtensor<[3,2],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[3,6],f32>
  return %0 : !torch.vtensor<[3,6],f32>
}

// -----

// Must not fire: a dynamic shape (the slices' sizes are not known here).
// CHECK-LABEL: func.func @dynamic
// CHECK:         torch.aten.slice_scatter
func.func @dynamic(%x: !torch.vtensor<[?,6],f32>, %s: !torch.vtensor<[?,2],f32>) -> !torch.vtensor<[?,6],f32> {
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %0 = torch.aten.slice_scatter %x, %s, %int1, %int1, %int3, %int1 : !torch.vtensor<[?,6],f32>, !torch.vtensor<[?,2],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[?,6],f32>
  return %0 : !torch.vtensor<[?,6],f32>
}
