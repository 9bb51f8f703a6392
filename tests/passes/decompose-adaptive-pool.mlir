// RUN: kiln opt %s --pass decompose-adaptive-pool --split-input-file | filecheck %s

// 4x4x6 to 2x2x3: windows of 2x2x2, disjoint: an avg_pool3d with that kernel and stride.
// CHECK-LABEL: func.func @divisible
// CHECK:         %[[KERNEL:.*]] = torch.prim.ListConstruct %int2, %int2, %int2
// CHECK:         %[[STRIDE:.*]] = torch.prim.ListConstruct %int2, %int2, %int2
// CHECK:         %[[PADDING:.*]] = torch.prim.ListConstruct %int0, %int0, %int0
// CHECK:         %[[Y:.*]] = torch.aten.avg_pool3d %arg0, %[[KERNEL]], %[[STRIDE]], %[[PADDING]], %false, %true, %none : {{.*}} -> !torch.vtensor<[1,2,2,2,3],f32>
// CHECK:         return %[[Y]]
func.func @divisible(%x: !torch.vtensor<[1,2,4,4,6],f32>) -> !torch.vtensor<[1,2,2,2,3],f32> {
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %sizes = torch.prim.ListConstruct %int2, %int2, %int3 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten._adaptive_avg_pool3d %x, %sizes : !torch.vtensor<[1,2,4,4,6],f32>, !torch.list<int> -> !torch.vtensor<[1,2,2,2,3],f32>
  return %0 : !torch.vtensor<[1,2,2,2,3],f32>
}

// -----

// Must not fire: 5 to 2 has overlapping windows of varying size.
// CHECK-LABEL: func.func @uneven
// CHECK:         torch.aten._adaptive_avg_pool3d
func.func @uneven(%x: !torch.vtensor<[1,2,5,4,4],f32>) -> !torch.vtensor<[1,2,2,2,2],f32> {
  %int2 = torch.constant.int 2
  %sizes = torch.prim.ListConstruct %int2, %int2, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten._adaptive_avg_pool3d %x, %sizes : !torch.vtensor<[1,2,5,4,4],f32>, !torch.list<int> -> !torch.vtensor<[1,2,2,2,2],f32>
  return %0 : !torch.vtensor<[1,2,2,2,2],f32>
}
