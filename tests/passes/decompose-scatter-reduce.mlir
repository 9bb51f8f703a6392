// RUN: kiln opt %s --pass decompose-scatter-reduce --split-input-file | filecheck %s

// mean without x's own values: the scattered-to places zeroed, the sum added there, divided by
// how many values each place got (at least 1: untouched places keep x).
// CHECK-LABEL: func.func @mean_without_self
// CHECK-DAG:     %[[ONES:.*]] = torch.vtensor.literal(dense<1.000000e+00> : tensor<3x4xf32>)
// CHECK-DAG:     %[[NO_COUNTS:.*]] = torch.vtensor.literal(dense<0.000000e+00> : tensor<3x6xf32>)
// CHECK-DAG:     %[[ZEROS:.*]] = torch.vtensor.literal(dense<0.000000e+00> : tensor<3x4xf32>)
// CHECK:         %[[BASE:.*]] = torch.aten.scatter.src %arg0, %int1, %arg1, %[[ZEROS]]
// CHECK:         %[[TOTAL:.*]] = torch.aten.scatter_add %[[BASE]], %int1, %arg1, %arg2
// CHECK:         %[[COUNT:.*]] = torch.aten.scatter_add %[[NO_COUNTS]], %int1, %arg1, %[[ONES]]
// CHECK:         %[[DIVISOR:.*]] = torch.aten.clamp %[[COUNT]], %float1.000000e00, %none
// CHECK:         %[[Y:.*]] = torch.aten.div.Tensor %[[TOTAL]], %[[DIVISOR]]
// CHECK:         return %[[Y]]
func.func @mean_without_self(%x: !torch.vtensor<[3,6],f32>, %i: !torch.vtensor<[3,4],si64>, %s: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[3,6],f32> {
  %int1 = torch.constant.int 1
  %str = torch.constant.str "mean"
  %false = torch.constant.bool false
  %0 = torch.aten.scatter_reduce.two %x, %int1, %i, %s, %str, %false : !torch.vtensor<[3,6],f32>, !torch.int, !torch.vtensor<[3,4],si64>, !torch.vtensor<[3,4],f32>, !torch.str, !torch.bool -> !torch.vtensor<[3,6],f32>
  return %0 : !torch.vtensor<[3,6],f32>
}

// -----

// sum with x's values, and scatter(reduce="add"): scatter_add itself.
// CHECK-LABEL: func.func @sums
// CHECK:         %[[A:.*]] = torch.aten.scatter_add %arg0, %int0, %arg1, %arg2
// CHECK:         %[[B:.*]] = torch.aten.scatter_add %arg0, %int0, %arg1, %arg2
// CHECK:         return %[[A]], %[[B]]
func.func @sums(%x: !torch.vtensor<[5],si64>, %i: !torch.vtensor<[3],si64>, %s: !torch.vtensor<[3],si64>) -> (!torch.vtensor<[5],si64>, !torch.vtensor<[5],si64>) {
  %int0 = torch.constant.int 0
  %sum = torch.constant.str "sum"
  %add = torch.constant.str "add"
  %true = torch.constant.bool true
  %0 = torch.aten.scatter_reduce.two %x, %int0, %i, %s, %sum, %true : !torch.vtensor<[5],si64>, !torch.int, !torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>, !torch.str, !torch.bool -> !torch.vtensor<[5],si64>
  %1 = torch.aten.scatter.reduce %x, %int0, %i, %s, %add : !torch.vtensor<[5],si64>, !torch.int, !torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>, !torch.str -> !torch.vtensor<[5],si64>
  return %0, %1 : !torch.vtensor<[5],si64>, !torch.vtensor<[5],si64>
}

// -----

// Must not fire: amax (no primitive does it), and an integer mean (PyTorch floors it).
// CHECK-LABEL: func.func @not_these
// CHECK:         torch.aten.scatter_reduce.two %arg0, %int0, %arg1, %arg2, %str
// CHECK:         torch.aten.scatter_reduce.two %arg3, %int0, %arg1, %arg4, %str_0
func.func @not_these(%x: !torch.vtensor<[5],f32>, %i: !torch.vtensor<[3],si64>, %s: !torch.vtensor<[3],f32>, %n: !torch.vtensor<[5],si64>, %m: !torch.vtensor<[3],si64>) -> (!torch.vtensor<[5],f32>, !torch.vtensor<[5],si64>) {
  %int0 = torch.constant.int 0
  %amax = torch.constant.str "amax"
  %mean = torch.constant.str "mean"
  %true = torch.constant.bool true
  %0 = torch.aten.scatter_reduce.two %x, %int0, %i, %s, %amax, %true : !torch.vtensor<[5],f32>, !torch.int, !torch.vtensor<[3],si64>, !torch.vtensor<[3],f32>, !torch.str, !torch.bool -> !torch.vtensor<[5],f32>
  %1 = torch.aten.scatter_reduce.two %n, %int0, %i, %m, %mean, %true : !torch.vtensor<[5],si64>, !torch.int, !torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>, !torch.str, !torch.bool -> !torch.vtensor<[5],si64>
  return %0, %1 : !torch.vtensor<[5],f32>, !torch.vtensor<[5],si64>
}
