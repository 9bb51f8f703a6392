// RUN: kiln opt %s --pass accumulate-in-f32 --split-input-file | filecheck %s

// A bf16 sum over the last two dims (a mean's, as torch-mlir decomposes it): summed in f32, rounded once.
// CHECK-LABEL: func.func @pooled_bf16
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[2,8,7,7],f32>
// CHECK:         %[[SUM:.*]] = torch.aten.sum.dim_IntList %[[UP]], {{.*}} -> !torch.vtensor<[2,8],f32>
// CHECK:         %[[DOWN:.*]] = torch.aten.to.dtype %[[SUM]], {{.*}} -> !torch.vtensor<[2,8],bf16>
// CHECK:         torch.aten.div.Scalar %[[DOWN]]
func.func @pooled_bf16(%x: !torch.vtensor<[2,8,7,7],bf16>) -> !torch.vtensor<[2,8],bf16> {
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int49 = torch.constant.int 49
  %none = torch.constant.none
  %false = torch.constant.bool false
  %dims = torch.prim.ListConstruct %int2, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.sum.dim_IntList %x, %dims, %false, %none : !torch.vtensor<[2,8,7,7],bf16>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,8],bf16>
  %1 = torch.aten.div.Scalar %0, %int49 : !torch.vtensor<[2,8],bf16>, !torch.int -> !torch.vtensor<[2,8],bf16>
  return %1 : !torch.vtensor<[2,8],bf16>
}

// -----

// A whole-tensor sum of f16: the same.
// CHECK-LABEL: func.func @total_f16
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[3,5],f32>
// CHECK:         %[[SUM:.*]] = torch.aten.sum %[[UP]], %none : !torch.vtensor<[3,5],f32>, !torch.none -> !torch.vtensor<[],f32>
// CHECK:         torch.aten.to.dtype %[[SUM]], {{.*}} -> !torch.vtensor<[],f16>
func.func @total_f16(%x: !torch.vtensor<[3,5],f16>) -> !torch.vtensor<[],f16> {
  %none = torch.constant.none
  %0 = torch.aten.sum %x, %none : !torch.vtensor<[3,5],f16>, !torch.none -> !torch.vtensor<[],f16>
  return %0 : !torch.vtensor<[],f16>
}

// -----

// f32 sums, and a bf16 sum whose dtype the program states (f32 already), are left as they are.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     torch.aten.to.dtype
// CHECK:         torch.aten.sum.dim_IntList %arg0
// CHECK:         torch.aten.sum.dim_IntList %arg1
// CHECK-NOT:     torch.aten.to.dtype
func.func @left_alone(%x: !torch.vtensor<[4,6],f32>, %y: !torch.vtensor<[4,6],bf16>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) {
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %none = torch.constant.none
  %false = torch.constant.bool false
  %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.sum.dim_IntList %x, %dims, %false, %none : !torch.vtensor<[4,6],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4],f32>
  %1 = torch.aten.sum.dim_IntList %y, %dims, %false, %int6 : !torch.vtensor<[4,6],bf16>, !torch.list<int>, !torch.bool, !torch.int -> !torch.vtensor<[4],f32>
  return %0, %1 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}

// -----

// A bf16 cumsum and a product over a dim: the same, each result rounded once.
// CHECK-LABEL: func.func @running_and_product
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[4,6],f32>
// CHECK:         %[[CUM:.*]] = torch.aten.cumsum %[[UP]], %int1, %none : {{.*}} -> !torch.vtensor<[4,6],f32>
// CHECK:         torch.aten.to.dtype %[[CUM]], {{.*}} -> !torch.vtensor<[4,6],bf16>
// CHECK:         %[[UP2:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[4,6],f32>
// CHECK:         %[[PROD:.*]] = torch.aten.prod.dim_int %[[UP2]], %int1, %false, %none : {{.*}} -> !torch.vtensor<[4],f32>
// CHECK:         torch.aten.to.dtype %[[PROD]], {{.*}} -> !torch.vtensor<[4],bf16>
func.func @running_and_product(%x: !torch.vtensor<[4,6],bf16>) -> (!torch.vtensor<[4,6],bf16>, !torch.vtensor<[4],bf16>) {
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %false = torch.constant.bool false
  %0 = torch.aten.cumsum %x, %int1, %none : !torch.vtensor<[4,6],bf16>, !torch.int, !torch.none -> !torch.vtensor<[4,6],bf16>
  %1 = torch.aten.prod.dim_int %x, %int1, %false, %none : !torch.vtensor<[4,6],bf16>, !torch.int, !torch.bool, !torch.none -> !torch.vtensor<[4],bf16>
  return %0, %1 : !torch.vtensor<[4,6],bf16>, !torch.vtensor<[4],bf16>
}
