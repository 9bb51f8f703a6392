// RUN: kiln opt %s --pass rotary-as-gather --split-input-file | filecheck %s

// Phi's partial rotary, as transformers writes it: the first 4 of 10 dims rotated (rotate_half
// slicing the slice), the other 6 passed through. One op over the whole head: x * cos[idx] +
// x[perm] * where(d < 2, -sin[idx], sin[idx]), and x where d >= 4.
// CHECK-LABEL: func.func @partial
// CHECK-DAG:     %[[PERM:.*]] = torch.vtensor.literal(dense<[2, 3, 0, 1, 4, 5, 6, 7, 8, 9]> : tensor<10xsi64>)
// CHECK-DAG:     %[[IDX:.*]] = torch.vtensor.literal(dense<[0, 1, 2, 3, 0, 0, 0, 0, 0, 0]> : tensor<10xsi64>)
// CHECK-DAG:     %[[HALF:.*]] = torch.vtensor.literal(dense<[true, true, false, false, false, false, false, false, false, false]> : tensor<10xi1>)
// CHECK-DAG:     %[[ROTATED:.*]] = torch.vtensor.literal(dense<[true, true, true, true, false, false, false, false, false, false]> : tensor<10xi1>)
// CHECK:         %[[SIN:.*]] = torch.aten.index_select %arg2, %{{.*}}, %[[IDX]] : !torch.vtensor<[1,1,3,4],f32>, !torch.int, !torch.vtensor<[10],si64> -> !torch.vtensor<[1,1,3,10],f32>
// CHECK:         %[[NEG:.*]] = torch.aten.neg %[[SIN]]
// CHECK:         %[[SIGNED:.*]] = torch.aten.where.self %[[HALF]], %[[NEG]], %[[SIN]]
// CHECK:         %[[COS:.*]] = torch.aten.index_select %arg1, %{{.*}}, %[[IDX]]
// CHECK:         %[[STRAIGHT:.*]] = torch.aten.mul.Tensor %arg0, %[[COS]] : !torch.vtensor<[1,2,3,10],f32>, !torch.vtensor<[1,1,3,10],f32> -> !torch.vtensor<[1,2,3,10],f32>
// CHECK:         %[[TURNED_X:.*]] = torch.aten.index_select %arg0, %{{.*}}, %[[PERM]]
// CHECK:         %[[TURNED:.*]] = torch.aten.mul.Tensor %[[TURNED_X]], %[[SIGNED]]
// CHECK:         %[[SUM:.*]] = torch.aten.add.Tensor %[[STRAIGHT]], %[[TURNED]]
// CHECK:         %[[OUT:.*]] = torch.aten.where.self %[[ROTATED]], %[[SUM]], %arg0
// CHECK-NOT:     torch.aten.cat
// CHECK-NOT:     torch.aten.slice.Tensor
// CHECK:         return %[[OUT]]
func.func @partial(%x: !torch.vtensor<[1,2,3,10],f32>, %cos: !torch.vtensor<[1,1,3,4],f32>, %sin: !torch.vtensor<[1,1,3,4],f32>) -> !torch.vtensor<[1,2,3,10],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int4 = torch.constant.int 4
  %intm1 = torch.constant.int -1
  %end = torch.constant.int 9223372036854775807
  %xr = torch.aten.slice.Tensor %x, %int3, %int0, %int4, %int1 : !torch.vtensor<[1,2,3,10],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %xp = torch.aten.slice.Tensor %x, %int3, %int4, %end, %int1 : !torch.vtensor<[1,2,3,10],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,6],f32>
  %straight = torch.aten.mul.Tensor %xr, %cos : !torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,1,3,4],f32> -> !torch.vtensor<[1,2,3,4],f32>
  %x1 = torch.aten.slice.Tensor %xr, %int3, %int0, %int2, %int1 : !torch.vtensor<[1,2,3,4],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,2],f32>
  %x2 = torch.aten.slice.Tensor %xr, %int3, %int2, %end, %int1 : !torch.vtensor<[1,2,3,4],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,2],f32>
  %negx2 = torch.aten.neg %x2 : !torch.vtensor<[1,2,3,2],f32> -> !torch.vtensor<[1,2,3,2],f32>
  %halves = torch.prim.ListConstruct %negx2, %x1 : (!torch.vtensor<[1,2,3,2],f32>, !torch.vtensor<[1,2,3,2],f32>) -> !torch.list<vtensor>
  %rotated_half = torch.aten.cat %halves, %intm1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %turned = torch.aten.mul.Tensor %rotated_half, %sin : !torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,1,3,4],f32> -> !torch.vtensor<[1,2,3,4],f32>
  %embedded = torch.aten.add.Tensor %straight, %turned, %int1 : !torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,2,3,4],f32>, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %parts = torch.prim.ListConstruct %embedded, %xp : (!torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,2,3,6],f32>) -> !torch.list<vtensor>
  %out = torch.aten.cat %parts, %intm1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,3,10],f32>
  return %out : !torch.vtensor<[1,2,3,10],f32>
}

// -----

// Must not fire: the passed-through part is another tensor's (%y), and the sign is on the wrong
// half (cat([x1, -x2]) is not rotate_half).
// CHECK-LABEL: func.func @not_a_rotary
// CHECK-NOT:     torch.aten.index_select
// CHECK-NOT:     torch.aten.where.self
// CHECK:         return
func.func @not_a_rotary(%x: !torch.vtensor<[1,2,3,10],f32>, %y: !torch.vtensor<[1,2,3,10],f32>, %cos: !torch.vtensor<[1,1,3,4],f32>, %sin: !torch.vtensor<[1,1,3,4],f32>) -> (!torch.vtensor<[1,2,3,10],f32>, !torch.vtensor<[1,2,3,10],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int4 = torch.constant.int 4
  %int10 = torch.constant.int 10
  %xr = torch.aten.slice.Tensor %x, %int3, %int0, %int4, %int1 : !torch.vtensor<[1,2,3,10],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %xp = torch.aten.slice.Tensor %x, %int3, %int4, %int10, %int1 : !torch.vtensor<[1,2,3,10],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,6],f32>
  %yp = torch.aten.slice.Tensor %y, %int3, %int4, %int10, %int1 : !torch.vtensor<[1,2,3,10],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,6],f32>
  %straight = torch.aten.mul.Tensor %xr, %cos : !torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,1,3,4],f32> -> !torch.vtensor<[1,2,3,4],f32>
  %x1 = torch.aten.slice.Tensor %x, %int3, %int0, %int2, %int1 : !torch.vtensor<[1,2,3,10],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,2],f32>
  %x2 = torch.aten.slice.Tensor %x, %int3, %int2, %int4, %int1 : !torch.vtensor<[1,2,3,10],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,3,2],f32>
  %negx2 = torch.aten.neg %x2 : !torch.vtensor<[1,2,3,2],f32> -> !torch.vtensor<[1,2,3,2],f32>
  %halves = torch.prim.ListConstruct %negx2, %x1 : (!torch.vtensor<[1,2,3,2],f32>, !torch.vtensor<[1,2,3,2],f32>) -> !torch.list<vtensor>
  %rotated_half = torch.aten.cat %halves, %int3 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %turned = torch.aten.mul.Tensor %rotated_half, %sin : !torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,1,3,4],f32> -> !torch.vtensor<[1,2,3,4],f32>
  %embedded = torch.aten.add.Tensor %straight, %turned, %int1 : !torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,2,3,4],f32>, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %parts_y = torch.prim.ListConstruct %embedded, %yp : (!torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,2,3,6],f32>) -> !torch.list<vtensor>
  %out_y = torch.aten.cat %parts_y, %int3 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,3,10],f32>
  %wrong_halves = torch.prim.ListConstruct %x1, %negx2 : (!torch.vtensor<[1,2,3,2],f32>, !torch.vtensor<[1,2,3,2],f32>) -> !torch.list<vtensor>
  %wrong_half = torch.aten.cat %wrong_halves, %int3 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %wrong_turned = torch.aten.mul.Tensor %sin, %wrong_half : !torch.vtensor<[1,1,3,4],f32>, !torch.vtensor<[1,2,3,4],f32> -> !torch.vtensor<[1,2,3,4],f32>
  %wrong = torch.aten.add.Tensor %wrong_turned, %straight, %int1 : !torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,2,3,4],f32>, !torch.int -> !torch.vtensor<[1,2,3,4],f32>
  %parts_x = torch.prim.ListConstruct %wrong, %xp : (!torch.vtensor<[1,2,3,4],f32>, !torch.vtensor<[1,2,3,6],f32>) -> !torch.list<vtensor>
  %out_x = torch.aten.cat %parts_x, %int3 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,3,10],f32>
  return %out_y, %out_x : !torch.vtensor<[1,2,3,10],f32>, !torch.vtensor<[1,2,3,10],f32>
}

// -----

// Fires on the other spellings: rotate_half's halves sliced from x directly, the products and the
// sum in the other order, the dim as a positive number, bf16.
// CHECK-LABEL: func.func @other_spellings
// CHECK:         %[[TURNED_X:.*]] = torch.aten.index_select %arg0, %{{.*}}, %{{.*}} : !torch.vtensor<[2,8],bf16>
// CHECK:         %[[TURNED:.*]] = torch.aten.mul.Tensor %[[TURNED_X]], %{{.*}} : !torch.vtensor<[2,8],bf16>, !torch.vtensor<[2,8],bf16> -> !torch.vtensor<[2,8],bf16>
// CHECK:         %[[SUM:.*]] = torch.aten.add.Tensor %{{.*}}, %[[TURNED]]
// CHECK:         %[[OUT:.*]] = torch.aten.where.self %{{.*}}, %[[SUM]], %arg0
// CHECK-NOT:     torch.aten.cat
// CHECK:         return %[[OUT]]
func.func @other_spellings(%x: !torch.vtensor<[2,8],bf16>, %cos: !torch.vtensor<[2,6],bf16>, %sin: !torch.vtensor<[2,6],bf16>) -> !torch.vtensor<[2,8],bf16> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %int6 = torch.constant.int 6
  %int8 = torch.constant.int 8
  %xr = torch.aten.slice.Tensor %x, %int1, %int0, %int6, %int1 : !torch.vtensor<[2,8],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,6],bf16>
  %xp = torch.aten.slice.Tensor %x, %int1, %int6, %int8, %int1 : !torch.vtensor<[2,8],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,2],bf16>
  %straight = torch.aten.mul.Tensor %cos, %xr : !torch.vtensor<[2,6],bf16>, !torch.vtensor<[2,6],bf16> -> !torch.vtensor<[2,6],bf16>
  %x1 = torch.aten.slice.Tensor %x, %int1, %int0, %int3, %int1 : !torch.vtensor<[2,8],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,3],bf16>
  %x2 = torch.aten.slice.Tensor %x, %int1, %int3, %int6, %int1 : !torch.vtensor<[2,8],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,3],bf16>
  %negx2 = torch.aten.neg %x2 : !torch.vtensor<[2,3],bf16> -> !torch.vtensor<[2,3],bf16>
  %halves = torch.prim.ListConstruct %negx2, %x1 : (!torch.vtensor<[2,3],bf16>, !torch.vtensor<[2,3],bf16>) -> !torch.list<vtensor>
  %rotated_half = torch.aten.cat %halves, %int1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[2,6],bf16>
  %turned = torch.aten.mul.Tensor %sin, %rotated_half : !torch.vtensor<[2,6],bf16>, !torch.vtensor<[2,6],bf16> -> !torch.vtensor<[2,6],bf16>
  %embedded = torch.aten.add.Tensor %turned, %straight, %int1 : !torch.vtensor<[2,6],bf16>, !torch.vtensor<[2,6],bf16>, !torch.int -> !torch.vtensor<[2,6],bf16>
  %parts = torch.prim.ListConstruct %embedded, %xp : (!torch.vtensor<[2,6],bf16>, !torch.vtensor<[2,2],bf16>) -> !torch.list<vtensor>
  %out = torch.aten.cat %parts, %int1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[2,8],bf16>
  return %out : !torch.vtensor<[2,8],bf16>
}
