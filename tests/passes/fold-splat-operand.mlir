// RUN: kiln opt %s --pass fold-splat-operand --split-input-file | filecheck %s

// BEiT's bias plus an all-true mask broadcast to the batch: the bias plus 1, broadcast after.
// CHECK-LABEL: func.func @bias_plus_mask
// CHECK:         %[[SUM:.*]] = torch.aten.add.Scalar %arg0, %[[ONE:.*]], %{{.*}} : !torch.vtensor<[1,12,5,5],bf16>, !torch.int, !torch.int -> !torch.vtensor<[1,12,5,5],bf16>
// CHECK:         %[[BIAS:.*]] = torch.aten.broadcast_to %[[SUM]], %{{.*}} -> !torch.vtensor<[4,12,5,5],bf16>
// CHECK:         return %[[BIAS]]
func.func @bias_plus_mask(%bias: !torch.vtensor<[1,12,5,5],bf16>) -> !torch.vtensor<[4,12,5,5],bf16> {
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  %int5 = torch.constant.int 5
  %intm1 = torch.constant.int -1
  %true = torch.vtensor.literal(dense<true> : tensor<1x1x5x1xi1>) : !torch.vtensor<[1,1,5,1],i1>
  %shape = torch.prim.ListConstruct %int4, %intm1, %int5, %int5 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %mask = torch.aten.broadcast_to %true, %shape : !torch.vtensor<[1,1,5,1],i1>, !torch.list<int> -> !torch.vtensor<[4,1,5,5],i1>
  %sum = torch.aten.add.Tensor %bias, %mask, %int1 : !torch.vtensor<[1,12,5,5],bf16>, !torch.vtensor<[4,1,5,5],i1>, !torch.int -> !torch.vtensor<[4,12,5,5],bf16>
  return %sum : !torch.vtensor<[4,12,5,5],bf16>
}

// -----

// The same bias plus transformers' mask as it comes: arange(5) >= 0, reshaped and broadcast, true for all.
// CHECK-LABEL: func.func @bias_plus_arange_mask
// CHECK-NOT:     torch.aten.add.Tensor
// CHECK:         %[[SUM:.*]] = torch.aten.add.Scalar %arg0, {{.*}} -> !torch.vtensor<[1,12,5,5],bf16>
// CHECK:         %[[BIAS:.*]] = torch.aten.broadcast_to %[[SUM]], %{{.*}} -> !torch.vtensor<[4,12,5,5],bf16>
// CHECK:         return %[[BIAS]]
func.func @bias_plus_arange_mask(%bias: !torch.vtensor<[1,12,5,5],bf16>) -> !torch.vtensor<[4,12,5,5],bf16> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  %int5 = torch.constant.int 5
  %intm1 = torch.constant.int -1
  %range = torch.aten.arange.start_step %int0, %int5, %int1, %none, %int4, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[5],si64>
  %rows = torch.prim.ListConstruct %int1, %int1, %int5, %int1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %view = torch.aten.view %range, %rows : !torch.vtensor<[5],si64>, !torch.list<int> -> !torch.vtensor<[1,1,5,1],si64>
  %true = torch.aten.ge.Scalar %view, %int0 : !torch.vtensor<[1,1,5,1],si64>, !torch.int -> !torch.vtensor<[1,1,5,1],i1>
  %shape = torch.prim.ListConstruct %int4, %intm1, %int5, %int5 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %mask = torch.aten.broadcast_to %true, %shape : !torch.vtensor<[1,1,5,1],i1>, !torch.list<int> -> !torch.vtensor<[4,1,5,5],i1>
  %sum = torch.aten.add.Tensor %bias, %mask, %int1 : !torch.vtensor<[1,12,5,5],bf16>, !torch.vtensor<[4,1,5,5],i1>, !torch.int -> !torch.vtensor<[4,12,5,5],bf16>
  return %sum : !torch.vtensor<[4,12,5,5],bf16>
}

// -----

// A splat first, in a product: the same op the other way round, nothing to broadcast.
// CHECK-LABEL: func.func @splat_first
// CHECK:         %[[P:.*]] = torch.aten.mul.Scalar %arg0, %{{.*}} : !torch.vtensor<[2,3],f32>, !torch.float -> !torch.vtensor<[2,3],f32>
// CHECK-NEXT:    return %[[P]]
func.func @splat_first(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %half = torch.vtensor.literal(dense<5.000000e-01> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %p = torch.aten.mul.Tensor %half, %x : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  return %p : !torch.vtensor<[2,3],f32>
}

// -----

// Must not fire: an integer x (the result's dtype would be promoted), c + 2 * x (alpha on x), a
// literal that is not a splat, and an arange comparison that depends on the element (arange(5) >= 1).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: torch.aten.add.Tensor
func.func @kept(%i: !torch.vtensor<[2,3],si64>, %x: !torch.vtensor<[2,3],f32>, %y: !torch.vtensor<[5],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[5],f32>) {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  %int0 = torch.constant.int 0
  %int4 = torch.constant.int 4
  %int5 = torch.constant.int 5
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %half = torch.vtensor.literal(dense<5.000000e-01> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %ramp = torch.vtensor.literal(dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %a = torch.aten.add.Tensor %i, %half, %int1 : !torch.vtensor<[2,3],si64>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %b = torch.aten.add.Tensor %half, %x, %int2 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %c = torch.aten.add.Tensor %x, %ramp, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %range = torch.aten.arange.start_step %int0, %int5, %int1, %none, %int4, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[5],si64>
  %some = torch.aten.ge.Scalar %range, %int1 : !torch.vtensor<[5],si64>, !torch.int -> !torch.vtensor<[5],i1>
  %d = torch.aten.add.Tensor %y, %some, %int1 : !torch.vtensor<[5],f32>, !torch.vtensor<[5],i1>, !torch.int -> !torch.vtensor<[5],f32>
  return %a, %b, %c, %d : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[5],f32>
}
