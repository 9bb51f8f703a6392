// RUN: kiln opt %s --pass decompose-pool-indices --split-input-file | filecheck %s

// 2x2 windows of a 4x4 image, indices read: values from max_pool2d; each window's 4 elements
// gathered (literal flat positions), the first maximum's place mapped to its flat input index.
// CHECK-LABEL: func.func @indices_read
// CHECK:         %[[VALUES:.*]] = torch.aten.max_pool2d %arg0
// CHECK:         %[[FLAT:.*]] = torch.aten.view %arg0, {{.*}} -> !torch.vtensor<[1,1,16],f32>
// CHECK:         %[[AT:.*]] = torch.vtensor.literal(dense<[0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]> : tensor<16xsi64>)
// CHECK:         %[[GATHERED:.*]] = torch.aten.index_select %[[FLAT]], %{{.*}}, %[[AT]]
// CHECK:         %[[WINDOWS:.*]] = torch.aten.view %[[GATHERED]], {{.*}} -> !torch.vtensor<[1,1,2,2,4],f32>
// CHECK:         %{{.*}}, %[[PLACE:.*]] = torch.aten.max.dim %[[WINDOWS]], %{{.*}}, %true
// CHECK:         %[[TABLE:.*]] = torch.vtensor.literal(dense<{{\[\[\[\[\[}}0, 1, 4, 5], [2, 3, 6, 7]], {{\[\[}}8, 9, 12, 13], [10, 11, 14, 15]]]]]> : tensor<1x1x2x2x4xsi64>)
// CHECK:         %[[PICKED:.*]] = torch.aten.gather %[[TABLE]], %{{.*}}, %[[PLACE]]
// CHECK:         %[[INDICES:.*]] = torch.aten.view %[[PICKED]], {{.*}} -> !torch.vtensor<[1,1,2,2],si64>
// CHECK:         return %[[VALUES]], %[[INDICES]]
func.func @indices_read(%x: !torch.vtensor<[1,1,4,4],f32>) -> (!torch.vtensor<[1,1,2,2],f32>, !torch.vtensor<[1,1,2,2],si64>) {
  %int2 = torch.constant.int 2
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct  : () -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %values, %indices = torch.aten.max_pool2d_with_indices %x, %kernel, %stride, %padding, %dilation, %false : !torch.vtensor<[1,1,4,4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[1,1,2,2],f32>, !torch.vtensor<[1,1,2,2],si64>
  return %values, %indices : !torch.vtensor<[1,1,2,2],f32>, !torch.vtensor<[1,1,2,2],si64>
}

// -----

// Padding 1 on a 3-wide row, windows of 2 with stride 2: the input padded with -inf first; the
// padding's places map to -1 (never a maximum).
// CHECK-LABEL: func.func @padded
// CHECK:         torch.aten.constant_pad_nd %arg0, {{.*}}, %float-Inf {{.*}} -> !torch.vtensor<[1,1,1,4],f32>
// CHECK:         torch.vtensor.literal(dense<{{\[\[\[\[\[}}-1, 0], [1, 2]]]]]> : tensor<1x1x1x2x2xsi64>)
func.func @padded(%x: !torch.vtensor<[1,1,1,3],f32>) -> (!torch.vtensor<[1,1,1,2],f32>, !torch.vtensor<[1,1,1,2],si64>) {
  %int2 = torch.constant.int 2
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int1, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int1, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %values, %indices = torch.aten.max_pool2d_with_indices %x, %kernel, %stride, %padding, %dilation, %false : !torch.vtensor<[1,1,1,3],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[1,1,1,2],f32>, !torch.vtensor<[1,1,1,2],si64>
  return %values, %indices : !torch.vtensor<[1,1,1,2],f32>, !torch.vtensor<[1,1,1,2],si64>
}

// -----

// Must not fire: nobody reads the indices (plain max pooling), which torch-mlir lowers whole.
// CHECK-LABEL: func.func @values_only
// CHECK:         torch.aten.max_pool2d_with_indices
// CHECK-NOT:     torch.aten.max.dim
func.func @values_only(%x: !torch.vtensor<[1,1,4,4],f32>) -> !torch.vtensor<[1,1,2,2],f32> {
  %int2 = torch.constant.int 2
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct  : () -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %values, %indices = torch.aten.max_pool2d_with_indices %x, %kernel, %stride, %padding, %dilation, %false : !torch.vtensor<[1,1,4,4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[1,1,2,2],f32>, !torch.vtensor<[1,1,2,2],si64>
  return %values : !torch.vtensor<[1,1,2,2],f32>
}
