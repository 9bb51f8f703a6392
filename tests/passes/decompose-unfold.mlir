// RUN: kiln opt %s --pass decompose-unfold --split-input-file | filecheck %s

// Windows of 3, step 2, along the last dim of 7: elements 0-2, 2-4, 4-6, gathered, then 2x(3x3).
// CHECK-LABEL: func.func @last_dim
// CHECK:         %[[INDEX:.*]] = torch.vtensor.literal(dense<[0, 1, 2, 2, 3, 4, 4, 5, 6]> : tensor<9xsi64>)
// CHECK:         %[[GATHERED:.*]] = torch.aten.index_select %arg0, %int1, %[[INDEX]] : {{.*}} -> !torch.vtensor<[2,9],f32>
// CHECK:         %[[Y:.*]] = torch.aten.view %[[GATHERED]], {{.*}} -> !torch.vtensor<[2,3,3],f32>
// CHECK:         return %[[Y]]
func.func @last_dim(%x: !torch.vtensor<[2,7],f32>) -> !torch.vtensor<[2,3,3],f32> {
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %int2 = torch.constant.int 2
  %0 = torch.aten.unfold %x, %int1, %int3, %int2 : !torch.vtensor<[2,7],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,3,3],f32>
  return %0 : !torch.vtensor<[2,3,3],f32>
}

// -----

// Along dim 0 of 5x4, windows of 2, step 3: the window axis moved last, as unfold puts it.
// CHECK-LABEL: func.func @first_dim
// CHECK:         %[[INDEX:.*]] = torch.vtensor.literal(dense<[0, 1, 3, 4]> : tensor<4xsi64>)
// CHECK:         %[[GATHERED:.*]] = torch.aten.index_select %arg0, %int0, %[[INDEX]] : {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[SPLIT:.*]] = torch.aten.view %[[GATHERED]], {{.*}} -> !torch.vtensor<[2,2,4],f32>
// CHECK:         %[[Y:.*]] = torch.aten.permute %[[SPLIT]], {{.*}} -> !torch.vtensor<[2,4,2],f32>
// CHECK:         return %[[Y]]
func.func @first_dim(%x: !torch.vtensor<[5,4],f32>) -> !torch.vtensor<[2,4,2],f32> {
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %0 = torch.aten.unfold %x, %int0, %int2, %int3 : !torch.vtensor<[5,4],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,4,2],f32>
  return %0 : !torch.vtensor<[2,4,2],f32>
}

// -----

// Must not fire: a dynamic shape.
// CHECK-LABEL: func.func @dynamic
// CHECK:         torch.aten.unfold
func.func @dynamic(%x: !torch.vtensor<[?,7],f32>) -> !torch.vtensor<[?,3,3],f32> {
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %int2 = torch.constant.int 2
  %0 = torch.aten.unfold %x, %int1, %int3, %int2 : !torch.vtensor<[?,7],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[?,3,3],f32>
  return %0 : !torch.vtensor<[?,3,3],f32>
}
