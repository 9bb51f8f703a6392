// RUN: kiln opt %s --pass fold-arange-compare --split-input-file | filecheck %s

// transformers' mask for a batch without padding: arange(197) >= 0, reshaped, is true everywhere.
// CHECK-LABEL: func.func @always_true
// CHECK:         %[[MASK:.*]] = torch.vtensor.literal(dense<true> : tensor<1x1x197x1xi1>) : !torch.vtensor<[1,1,197,1],i1>
// CHECK-NOT:     torch.aten.ge.Scalar
// CHECK:         return %[[MASK]]
func.func @always_true() -> !torch.vtensor<[1,1,197,1],i1> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  %int197 = torch.constant.int 197
  %range = torch.aten.arange.start_step %int0, %int197, %int1, %none, %int4, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[197],si64>
  %shape = torch.prim.ListConstruct %int1, %int1, %int197, %int1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %view = torch.aten.view %range, %shape : !torch.vtensor<[197],si64>, !torch.list<int> -> !torch.vtensor<[1,1,197,1],si64>
  %mask = torch.aten.ge.Scalar %view, %int0 : !torch.vtensor<[1,1,197,1],si64>, !torch.int -> !torch.vtensor<[1,1,197,1],i1>
  return %mask : !torch.vtensor<[1,1,197,1],i1>
}

// -----

// arange(2, 10, 3) = 2, 5, 8: never < 2, never == 9; but > 4 depends on the element, and the
// comparison with a tensor's own arange and a runtime number is left alone.
// CHECK-LABEL: func.func @decided_and_not
// CHECK:         %[[NEVER:.*]] = torch.vtensor.literal(dense<false> : tensor<3xi1>) : !torch.vtensor<[3],i1>
// CHECK:         %[[SOME:.*]] = torch.aten.gt.Scalar
// CHECK:         %[[RUNTIME:.*]] = torch.aten.lt.Scalar %{{.*}}, %arg0
// CHECK:         return %[[NEVER]], %[[NEVER]], %[[SOME]], %[[RUNTIME]]
func.func @decided_and_not(%n: !torch.int) -> (!torch.vtensor<[3],i1>, !torch.vtensor<[3],i1>, !torch.vtensor<[3],i1>, !torch.vtensor<[3],i1>) {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int4 = torch.constant.int 4
  %int9 = torch.constant.int 9
  %int10 = torch.constant.int 10
  %range = torch.aten.arange.start_step %int2, %int10, %int3, %none, %int4, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[3],si64>
  %never = torch.aten.lt.Scalar %range, %int2 : !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],i1>
  %none9 = torch.aten.eq.Scalar %range, %int9 : !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],i1>
  %some = torch.aten.gt.Scalar %range, %int4 : !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],i1>
  %runtime = torch.aten.lt.Scalar %range, %n : !torch.vtensor<[3],si64>, !torch.int -> !torch.vtensor<[3],i1>
  return %never, %none9, %some, %runtime : !torch.vtensor<[3],i1>, !torch.vtensor<[3],i1>, !torch.vtensor<[3],i1>, !torch.vtensor<[3],i1>
}
