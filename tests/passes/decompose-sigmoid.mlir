// RUN: kiln opt %s --pass decompose-sigmoid --split-input-file | filecheck %s

// sigmoid(x): reciprocal(1 + exp(-x)).
// CHECK-LABEL: func.func @sigmoid
// CHECK-DAG:     %[[ONE:.*]] = torch.constant.float 1.000000e+00
// CHECK:         %[[NEG:.*]] = torch.aten.neg %arg0
// CHECK-NEXT:    %[[EXP:.*]] = torch.aten.exp %[[NEG]]
// CHECK-NEXT:    %[[DEN:.*]] = torch.aten.add.Scalar %[[EXP]], %[[ONE]]
// CHECK-NEXT:    %[[Y:.*]] = torch.aten.reciprocal %[[DEN]] : !torch.vtensor<[2,5],f32> -> !torch.vtensor<[2,5],f32>
// CHECK-NEXT:    return %[[Y]]
func.func @sigmoid(%x: !torch.vtensor<[2,5],f32>) -> !torch.vtensor<[2,5],f32> {
  %y = torch.aten.sigmoid %x : !torch.vtensor<[2,5],f32> -> !torch.vtensor<[2,5],f32>
  return %y : !torch.vtensor<[2,5],f32>
}

// -----

// f16: computed in f32, rounded to f16 once at the end.
// CHECK-LABEL: func.func @f16_sigmoid
// CHECK:         torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[3],f32>
// CHECK:         torch.aten.reciprocal {{.*}} -> !torch.vtensor<[3],f32>
// CHECK:         torch.aten.to.dtype {{.*}} -> !torch.vtensor<[3],f16>
func.func @f16_sigmoid(%x: !torch.vtensor<[3],f16>) -> !torch.vtensor<[3],f16> {
  %y = torch.aten.sigmoid %x : !torch.vtensor<[3],f16> -> !torch.vtensor<[3],f16>
  return %y : !torch.vtensor<[3],f16>
}

// -----

// An int tensor: converted to the float result type first.
// CHECK-LABEL: func.func @int_sigmoid
// CHECK:         %[[X:.*]] = torch.aten.to.dtype %arg0, {{.*}} : !torch.vtensor<[3],si64>, {{.*}} -> !torch.vtensor<[3],f32>
// CHECK-NEXT:    torch.aten.neg %[[X]]
func.func @int_sigmoid(%n: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3],f32> {
  %y = torch.aten.sigmoid %n : !torch.vtensor<[3],si64> -> !torch.vtensor<[3],f32>
  return %y : !torch.vtensor<[3],f32>
}

// -----

// Must not fire: a tensor whose dtype is not known.
// CHECK-LABEL: func.func @unknown_dtype
// CHECK:         torch.aten.sigmoid %arg0
func.func @unknown_dtype(%x: !torch.vtensor) -> !torch.vtensor {
  %y = torch.aten.sigmoid %x : !torch.vtensor -> !torch.vtensor
  return %y : !torch.vtensor
}
