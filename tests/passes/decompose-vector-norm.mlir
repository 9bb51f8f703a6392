// RUN: kiln opt %s --pass decompose-vector-norm --split-input-file | filecheck %s

// ord 2 over every element: sqrt(sum(x * x)).
// CHECK-LABEL: func.func @l2_all
// CHECK-NOT:     torch.aten.abs
// CHECK:         %[[SQUARE:.*]] = torch.aten.mul.Tensor %arg0, %arg0
// CHECK:         %[[DIMS:.*]] = torch.prim.ListConstruct %int0, %int1
// CHECK:         %[[SUM:.*]] = torch.aten.sum.dim_IntList %[[SQUARE]], %[[DIMS]], %false, %none : {{.*}} -> !torch.vtensor<[],f32>
// CHECK:         %[[Y:.*]] = torch.aten.sqrt %[[SUM]]
// CHECK:         return %[[Y]]
func.func @l2_all(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[],f32> {
  %int2 = torch.constant.int 2
  %none = torch.constant.none
  %false = torch.constant.bool false
  %0 = torch.aten.linalg_vector_norm %x, %int2, %none, %false, %none : !torch.vtensor<[3,5],f32>, !torch.int, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// ord inf over the last dim, keepdim, f16: amax(|x|) in f32, rounded once.
// CHECK-LABEL: func.func @inf_keepdim_f16
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[3,5],f32>
// CHECK:         %[[ABS:.*]] = torch.aten.abs %[[UP]]
// CHECK:         %[[DIMS:.*]] = torch.prim.ListConstruct %int1
// CHECK:         %[[MAX:.*]] = torch.aten.amax %[[ABS]], %[[DIMS]], %true : {{.*}} -> !torch.vtensor<[3,1],f32>
// CHECK:         %[[DOWN:.*]] = torch.aten.to.dtype %[[MAX]], {{.*}} -> !torch.vtensor<[3,1],f16>
// CHECK:         return %[[DOWN]]
func.func @inf_keepdim_f16(%x: !torch.vtensor<[3,5],f16>) -> !torch.vtensor<[3,1],f16> {
  %inf = torch.constant.float 0x7FF0000000000000
  %int-1 = torch.constant.int -1
  %dims = torch.prim.ListConstruct %int-1 : (!torch.int) -> !torch.list<int>
  %true = torch.constant.bool true
  %none = torch.constant.none
  %0 = torch.aten.linalg_vector_norm %x, %inf, %dims, %true, %none : !torch.vtensor<[3,5],f16>, !torch.float, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3,1],f16>
  return %0 : !torch.vtensor<[3,1],f16>
}

// -----

// Another p: sum(|x| ** p) ** (1 / p).
// CHECK-LABEL: func.func @p3
// CHECK:         %[[ABS:.*]] = torch.aten.abs %arg0
// CHECK:         %[[POWERED:.*]] = torch.aten.pow.Tensor_Scalar %[[ABS]], %float3.000000e00
// CHECK:         %[[SUM:.*]] = torch.aten.sum.dim_IntList %[[POWERED]], {{.*}} -> !torch.vtensor<[5],f32>
// CHECK:         %[[Y:.*]] = torch.aten.pow.Tensor_Scalar %[[SUM]], %float3.333330e-01
// CHECK:         return %[[Y]]
func.func @p3(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[5],f32> {
  %p = torch.constant.float 3.000000e+00
  %int0 = torch.constant.int 0
  %dims = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %false = torch.constant.bool false
  %none = torch.constant.none
  %0 = torch.aten.linalg_vector_norm %x, %p, %dims, %false, %none : !torch.vtensor<[3,5],f32>, !torch.float, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[5],f32>
  return %0 : !torch.vtensor<[5],f32>
}

// -----

// Must not fire: a dtype argument (computing in another dtype than x's).
// CHECK-LABEL: func.func @with_dtype
// CHECK:         torch.aten.linalg_vector_norm
func.func @with_dtype(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[],f64> {
  %int2 = torch.constant.int 2
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int7 = torch.constant.int 7
  %0 = torch.aten.linalg_vector_norm %x, %int2, %none, %false, %int7 : !torch.vtensor<[3,5],f32>, !torch.int, !torch.none, !torch.bool, !torch.int -> !torch.vtensor<[],f64>
  return %0 : !torch.vtensor<[],f64>
}
