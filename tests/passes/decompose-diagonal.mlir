// RUN: kiln opt %s --pass decompose-diagonal --split-input-file | filecheck %s

// The diagonal above the main one of a 4x5 matrix: every 6th element of the 20, from element 1.
// CHECK-LABEL: func.func @diagonal
// CHECK:         %[[FLAT:.*]] = torch.aten.view %arg0, {{.*}} -> !torch.vtensor<[20],f32>
// CHECK:         %[[Y:.*]] = torch.aten.slice.Tensor %[[FLAT]], %int0, %int1, %int20, %int6 : {{.*}} -> !torch.vtensor<[4],f32>
// CHECK:         return %[[Y]]
func.func @diagonal(%x: !torch.vtensor<[4,5],f32>) -> !torch.vtensor<[4],f32> {
  %int1 = torch.constant.int 1
  %int0 = torch.constant.int 0
  %0 = torch.aten.diagonal %x, %int1, %int0, %int1 : !torch.vtensor<[4,5],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// Below the diagonal of dims 0 and 2 of a 3x2x4 tensor: those dims moved last, 3x4 flattened to
// 12, every 5th element from row 1 (element 4).
// CHECK-LABEL: func.func @batched_below
// CHECK:         %[[MOVED:.*]] = torch.aten.permute %arg0, {{.*}} -> !torch.vtensor<[2,3,4],f32>
// CHECK:         %[[FLAT:.*]] = torch.aten.view %[[MOVED]], {{.*}} -> !torch.vtensor<[2,12],f32>
// CHECK:         %[[Y:.*]] = torch.aten.slice.Tensor %[[FLAT]], %int1, %int4, %int10, %int5 : {{.*}} -> !torch.vtensor<[2,2],f32>
// CHECK:         return %[[Y]]
func.func @batched_below(%x: !torch.vtensor<[3,2,4],f32>) -> !torch.vtensor<[2,2],f32> {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %0 = torch.aten.diagonal %x, %int-1, %int0, %int2 : !torch.vtensor<[3,2,4],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,2],f32>
  return %0 : !torch.vtensor<[2,2],f32>
}

// -----

// diagonal_scatter: the same slice of the flattened view, written with slice_scatter, viewed back.
// CHECK-LABEL: func.func @scatter
// CHECK:         %[[FLAT:.*]] = torch.aten.view %arg0, {{.*}} -> !torch.vtensor<[20],f32>
// CHECK:         %[[WRITTEN:.*]] = torch.aten.slice_scatter %[[FLAT]], %arg1, %int0, %int1, %int20, %int6
// CHECK:         %[[Y:.*]] = torch.aten.view %[[WRITTEN]], {{.*}} -> !torch.vtensor<[4,5],f32>
// CHECK:         return %[[Y]]
func.func @scatter(%x: !torch.vtensor<[4,5],f32>, %s: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4,5],f32> {
  %int1 = torch.constant.int 1
  %int0 = torch.constant.int 0
  %0 = torch.aten.diagonal_scatter %x, %s, %int1, %int0, %int1 : !torch.vtensor<[4,5],f32>, !torch.vtensor<[4],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[4,5],f32>
  return %0 : !torch.vtensor<[4,5],f32>
}

// -----

// Must not fire: a dynamic shape.
// CHECK-LABEL: func.func @dynamic
// CHECK:         torch.aten.diagonal
func.func @dynamic(%x: !torch.vtensor<[?,5],f32>) -> !torch.vtensor<[?],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %0 = torch.aten.diagonal %x, %int0, %int0, %int1 : !torch.vtensor<[?,5],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[?],f32>
  return %0 : !torch.vtensor<[?],f32>
}
