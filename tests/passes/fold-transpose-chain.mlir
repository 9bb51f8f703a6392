// RUN: kiln opt %s --pass fold-transpose-chain --split-input-file | filecheck %s

// x.t().t() (two permutes) and transpose(transpose(x, 0, 2), -1, 0) cancel: x.
// CHECK-LABEL: func.func @cancelling
// CHECK-NOT:     torch.aten.permute
// CHECK-NOT:     torch.aten.transpose
// CHECK:         return %arg0, %arg1
func.func @cancelling(%x: !torch.vtensor<[2,3],f32>, %y: !torch.vtensor<[2,3,4],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3,4],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %intm1 = torch.constant.int -1
  %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %t = torch.aten.permute %x, %swap : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[3,2],f32>
  %tt = torch.aten.permute %t, %swap : !torch.vtensor<[3,2],f32>, !torch.list<int> -> !torch.vtensor<[2,3],f32>
  %u = torch.aten.transpose.int %y, %int0, %int2 : !torch.vtensor<[2,3,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[4,3,2],f32>
  %uu = torch.aten.transpose.int %u, %intm1, %int0 : !torch.vtensor<[4,3,2],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,3,4],f32>
  return %tt, %uu : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3,4],f32>
}

// -----

// permute(x, [2,0,1]) then transpose(1, 2): one permute, by [2,1,0].
// CHECK-LABEL: func.func @composed
// CHECK-DAG:     %[[I0:.*]] = torch.constant.int 0
// CHECK-DAG:     %[[I1:.*]] = torch.constant.int 1
// CHECK-DAG:     %[[I2:.*]] = torch.constant.int 2
// CHECK:         %[[DIMS:.*]] = torch.prim.ListConstruct %[[I2]], %[[I1]], %[[I0]]
// CHECK-NEXT:    %[[P:.*]] = torch.aten.permute %arg0, %[[DIMS]] : !torch.vtensor<[2,3,4],f32>, !torch.list<int> -> !torch.vtensor<[4,3,2],f32>
// CHECK-NEXT:    return %[[P]]
func.func @composed(%x: !torch.vtensor<[2,3,4],f32>) -> !torch.vtensor<[4,3,2],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %dims = torch.prim.ListConstruct %int2, %int0, %int1 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %p = torch.aten.permute %x, %dims : !torch.vtensor<[2,3,4],f32>, !torch.list<int> -> !torch.vtensor<[4,2,3],f32>
  %t = torch.aten.transpose.int %p, %int1, %int2 : !torch.vtensor<[4,2,3],f32>, !torch.int, !torch.int -> !torch.vtensor<[4,3,2],f32>
  return %t : !torch.vtensor<[4,3,2],f32>
}

// -----

// Must not fire: one transpose alone, and a transpose whose dims are not constants.
// CHECK-LABEL: func.func @single_and_unknown
// CHECK:         %[[T:.*]] = torch.aten.transpose.int %arg0
// CHECK-NEXT:    torch.aten.transpose.int %[[T]], %arg1
func.func @single_and_unknown(%x: !torch.vtensor<[2,3],f32>, %d: !torch.int) -> (!torch.vtensor<[3,2],f32>, !torch.vtensor<[2,3],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %t = torch.aten.transpose.int %x, %int0, %int1 : !torch.vtensor<[2,3],f32>, !torch.int, !torch.int -> !torch.vtensor<[3,2],f32>
  %u = torch.aten.transpose.int %t, %d, %int1 : !torch.vtensor<[3,2],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,3],f32>
  return %t, %u : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,3],f32>
}
