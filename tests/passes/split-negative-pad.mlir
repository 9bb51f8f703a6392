// RUN: kiln opt %s --pass split-negative-pad --split-input-file | filecheck %s

// F.pad(x, (-1, 2, 0, -1)): drop the first column and the last row, then add two columns.
// CHECK-LABEL: func.func @crop_then_pad
// CHECK:         %[[COLUMNS:.*]] = torch.aten.slice.Tensor %arg0, %int2, %int1, %int5, %int1 : {{.*}} -> !torch.vtensor<[2,4,4],f32>
// CHECK:         %[[ROWS:.*]] = torch.aten.slice.Tensor %[[COLUMNS]], %int1, %int0, %int3, %int1 : {{.*}} -> !torch.vtensor<[2,3,4],f32>
// CHECK:         %[[PADS:.*]] = torch.prim.ListConstruct %int0, %int2, %int0, %int0
// CHECK:         %[[Y:.*]] = torch.aten.constant_pad_nd %[[ROWS]], %[[PADS]], {{.*}} -> !torch.vtensor<[2,3,6],f32>
// CHECK:         return %[[Y]]
func.func @crop_then_pad(%x: !torch.vtensor<[2,4,5],f32>) -> !torch.vtensor<[2,3,6],f32> {
  %int-1 = torch.constant.int -1
  %int2 = torch.constant.int 2
  %int0 = torch.constant.int 0
  %pads = torch.prim.ListConstruct %int-1, %int2, %int0, %int-1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %fill = torch.constant.float 0.000000e+00
  %0 = torch.aten.constant_pad_nd %x, %pads, %fill : !torch.vtensor<[2,4,5],f32>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,3,6],f32>
  return %0 : !torch.vtensor<[2,3,6],f32>
}

// -----

// Only cropping: slices alone, no pad.
// CHECK-LABEL: func.func @crop_only
// CHECK:         %[[Y:.*]] = torch.aten.slice.Tensor %arg0, %int0, %int1, %int3, %int1
// CHECK-NOT:     torch.aten.constant_pad_nd
// CHECK:         return %[[Y]]
func.func @crop_only(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[2],f32> {
  %int-1 = torch.constant.int -1
  %pads = torch.prim.ListConstruct %int-1, %int-1 : (!torch.int, !torch.int) -> !torch.list<int>
  %fill = torch.constant.float 0.000000e+00
  %0 = torch.aten.constant_pad_nd %x, %pads, %fill : !torch.vtensor<[4],f32>, !torch.list<int>, !torch.float -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

// Must not fire: non-negative padding, which IREE takes as it is.
// CHECK-LABEL: func.func @plain_pad
// CHECK-NOT:     torch.aten.slice.Tensor
// CHECK:         torch.aten.constant_pad_nd %arg0
func.func @plain_pad(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[7],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %pads = torch.prim.ListConstruct %int1, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %fill = torch.constant.float 0.000000e+00
  %0 = torch.aten.constant_pad_nd %x, %pads, %fill : !torch.vtensor<[4],f32>, !torch.list<int>, !torch.float -> !torch.vtensor<[7],f32>
  return %0 : !torch.vtensor<[7],f32>
}
