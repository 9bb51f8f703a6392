// RUN: kiln opt %s --pass outline-row-programs --split-input-file | filecheck %s

// h = x + r, gelu(h + b) + r, then a layer norm with weight and bias, as kiln's IR has them: one row
// program. The function takes x, r and the three vectors in the order the ops read them; the steps
// number the inputs first (0-4), then each step's result (5 on); constants are inline. `h`, a sum read
// again after the norm (as a pre-norm block's residual is), is computed in the program too and is its
// second result (`outputs`: step 0). The body computes the same torch ops and returns both.
// CHECK-LABEL: func.func @gelu_layer_norm
// CHECK-NEXT:    %[[N:.*]]:2 = call @kiln_rows_0(%arg0, %arg1, %arg3, %arg2, %arg4) : (!torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[8],f32>) -> (!torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>)
// CHECK-NEXT:    %[[T:.*]] = torch.aten.mul.Tensor %[[N]]#1, %[[N]]#1
// CHECK-NEXT:    return %[[N]]#0, %[[T]]
// CHECK:       func.func private @kiln_rows_0
// CHECK-SAME:    kiln.contraction = {inputs = {{\[}}{{\[}}[2, 4, 8], "f32"], {{\[}}[2, 4, 8], "f32"], {{\[}}[8], "f32"], {{\[}}[8], "f32"], {{\[}}[8], "f32"]], kind = "rows", outputs = [0], shape = [2, 4, 8],
// CHECK-SAME:    steps = {{\[}}["add", "f32", 0, 1], ["add", "f32", 5, 2], ["mul", "f32", 6, 0.70710676908493042], ["erf", "f32", 7], ["mul", "f32", 6, 5.000000e-01], ["add", "f32", 8, 1.000000e+00], ["mul", "f32", 9, 10], ["add", "f32", 11, 1],
// CHECK-SAME:    ["sum", "f32", 12], ["div", "f32", 13, 8.000000e+00], ["sub", "f32", 12, 14], ["mul", "f32", 15, 15], ["sum", "f32", 16], ["div", "f32", 17, 8.000000e+00], ["add", "f32", 18, 9.9999997473787516E-6], ["rsqrt", "f32", 19], ["mul", "f32", 15, 20], ["mul", "f32", 21, 3], ["add", "f32", 22, 4]]}
// CHECK:         %[[H:.*]] = torch.aten.add.Tensor %arg0, %arg1
// CHECK:         torch.aten.erf
// CHECK:         torch.aten.sum.dim_IntList
// CHECK:         torch.aten.rsqrt
// CHECK:         %[[Y:.*]] = torch.aten.add.Tensor
// CHECK-NEXT:    return %[[Y]], %[[H]] : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>
module {
  func.func @gelu_layer_norm(%x: !torch.vtensor<[2,4,8],f32>, %r: !torch.vtensor<[2,4,8],f32>, %w: !torch.vtensor<[8],f32>, %bias: !torch.vtensor<[8],f32>, %beta: !torch.vtensor<[8],f32>) -> (!torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>) {
    %eps = torch.constant.float 9.9999997473787516E-6
    %c = torch.constant.float 0.70710676908493042
    %one = torch.constant.float 1.000000e+00
    %half = torch.constant.float 5.000000e-01
    %int8 = torch.constant.int 8
    %none = torch.constant.none
    %true = torch.constant.bool true
    %int2 = torch.constant.int 2
    %int1 = torch.constant.int 1
    %h = torch.aten.add.Tensor %x, %r, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>, !torch.int -> !torch.vtensor<[2,4,8],f32>
    %0 = torch.aten.add.Tensor %h, %bias, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[8],f32>, !torch.int -> !torch.vtensor<[2,4,8],f32>
    %1 = torch.aten.mul.Scalar %0, %c : !torch.vtensor<[2,4,8],f32>, !torch.float -> !torch.vtensor<[2,4,8],f32>
    %2 = torch.aten.erf %1 : !torch.vtensor<[2,4,8],f32> -> !torch.vtensor<[2,4,8],f32>
    %3 = torch.aten.mul.Scalar %0, %half : !torch.vtensor<[2,4,8],f32>, !torch.float -> !torch.vtensor<[2,4,8],f32>
    %4 = torch.aten.add.Scalar %2, %one, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.float, !torch.int -> !torch.vtensor<[2,4,8],f32>
    %5 = torch.aten.mul.Tensor %3, %4 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32> -> !torch.vtensor<[2,4,8],f32>
    %6 = torch.aten.add.Tensor %5, %r, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>, !torch.int -> !torch.vtensor<[2,4,8],f32>
    %dims = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
    %7 = torch.aten.sum.dim_IntList %6, %dims, %true, %none : !torch.vtensor<[2,4,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,4,1],f32>
    %8 = torch.aten.div.Scalar %7, %int8 : !torch.vtensor<[2,4,1],f32>, !torch.int -> !torch.vtensor<[2,4,1],f32>
    %9 = torch.aten.sub.Tensor %6, %8, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,1],f32>, !torch.int -> !torch.vtensor<[2,4,8],f32>
    %10 = torch.aten.mul.Tensor %9, %9 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32> -> !torch.vtensor<[2,4,8],f32>
    %11 = torch.aten.sum.dim_IntList %10, %dims, %true, %none : !torch.vtensor<[2,4,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,4,1],f32>
    %12 = torch.aten.div.Scalar %11, %int8 : !torch.vtensor<[2,4,1],f32>, !torch.int -> !torch.vtensor<[2,4,1],f32>
    %13 = torch.aten.add.Scalar %12, %eps, %int1 : !torch.vtensor<[2,4,1],f32>, !torch.float, !torch.int -> !torch.vtensor<[2,4,1],f32>
    %14 = torch.aten.rsqrt %13 : !torch.vtensor<[2,4,1],f32> -> !torch.vtensor<[2,4,1],f32>
    %15 = torch.aten.mul.Tensor %9, %14 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,1],f32> -> !torch.vtensor<[2,4,8],f32>
    %16 = torch.aten.mul.Tensor %15, %w : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[8],f32> -> !torch.vtensor<[2,4,8],f32>
    %17 = torch.aten.add.Tensor %16, %beta, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[8],f32>, !torch.int -> !torch.vtensor<[2,4,8],f32>
    %18 = torch.aten.mul.Tensor %h, %h : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32> -> !torch.vtensor<[2,4,8],f32>
    return %17, %18 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>
  }
}

// -----

// RMS norm in bf16 as the decompositions leave it: the upcast and the rounding back are cast steps,
// each step's dtype its result's. The bf16 weight multiplies in f32.
// CHECK-LABEL: func.func @rms_norm_bf16
// CHECK-NEXT:    %[[N:.*]] = call @kiln_rows_0(%arg0, %arg1)
// CHECK-NEXT:    return %[[N]]
// CHECK:       func.func private @kiln_rows_0
// CHECK-SAME:    steps = {{\[}}["cast", "f32", 0], ["mul", "f32", 2, 2], ["sum", "f32", 3], ["div", "f32", 4, 1.600000e+01], ["add", "f32", 5, 9.9999999999999995E-7], ["rsqrt", "f32", 6], ["mul", "f32", 2, 7], ["mul", "f32", 8, 1], ["cast", "bf16", 9]]
module {
  func.func @rms_norm_bf16(%x: !torch.vtensor<[4,16],bf16>, %w: !torch.vtensor<[16],bf16>) -> !torch.vtensor<[4,16],bf16> {
    %eps = torch.constant.float 9.9999999999999995E-7
    %int16 = torch.constant.int 16
    %int15 = torch.constant.int 15
    %int6 = torch.constant.int 6
    %int1 = torch.constant.int 1
    %none = torch.constant.none
    %false = torch.constant.bool false
    %true = torch.constant.bool true
    %x32 = torch.aten.to.dtype %x, %int6, %false, %false, %none : !torch.vtensor<[4,16],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[4,16],f32>
    %sq = torch.aten.mul.Tensor %x32, %x32 : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
    %dims = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
    %sum = torch.aten.sum.dim_IntList %sq, %dims, %true, %none : !torch.vtensor<[4,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4,1],f32>
    %mean = torch.aten.div.Scalar %sum, %int16 : !torch.vtensor<[4,1],f32>, !torch.int -> !torch.vtensor<[4,1],f32>
    %var = torch.aten.add.Scalar %mean, %eps, %int1 : !torch.vtensor<[4,1],f32>, !torch.float, !torch.int -> !torch.vtensor<[4,1],f32>
    %r = torch.aten.rsqrt %var : !torch.vtensor<[4,1],f32> -> !torch.vtensor<[4,1],f32>
    %n = torch.aten.mul.Tensor %x32, %r : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,1],f32> -> !torch.vtensor<[4,16],f32>
    %s = torch.aten.mul.Tensor %n, %w : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16],bf16> -> !torch.vtensor<[4,16],f32>
    %y = torch.aten.to.dtype %s, %int15, %false, %false, %none : !torch.vtensor<[4,16],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[4,16],bf16>
    return %y : !torch.vtensor<[4,16],bf16>
  }
}

// -----

// Not row programs: an elementwise chain without a sum (IREE fuses it already), a sum over another
// dimension than the last, and a sum whose value is also returned (every op's users must be inside).
// CHECK-LABEL: func.func @not_rows
// CHECK-NOT:     call @kiln_rows
// CHECK-NOT:   func.func private @kiln_rows
module {
  func.func @not_rows(%x: !torch.vtensor<[4,16],f32>) -> (!torch.vtensor<[4,16],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,1],f32>) {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %none = torch.constant.none
    %true = torch.constant.bool true
    %e = torch.aten.exp %x : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
    %chain = torch.aten.mul.Tensor %e, %x : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
    %d0 = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
    %cols = torch.aten.sum.dim_IntList %x, %d0, %true, %none : !torch.vtensor<[4,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,16],f32>
    %centered = torch.aten.sub.Tensor %x, %cols, %int1 : !torch.vtensor<[4,16],f32>, !torch.vtensor<[1,16],f32>, !torch.int -> !torch.vtensor<[4,16],f32>
    %d1 = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
    %rows = torch.aten.sum.dim_IntList %x, %d1, %true, %none : !torch.vtensor<[4,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4,1],f32>
    %scaled = torch.aten.div.Tensor %centered, %rows : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,1],f32> -> !torch.vtensor<[4,16],f32>
    return %chain, %scaled, %rows : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,1],f32>
  }
}

// -----

// A softmax as the decompositions leave it: max.dim (its indices unused) is the row maximum, the
// program's "amax". An elementwise chain with no reduction is a row program only when it has an exp,
// erf or tanh and at least 2^21 elements: %big's is; %small's (2^20) and %plain's (no exp) stay IREE's.
// CHECK-LABEL: func.func @softmax_and_chains
// CHECK-NEXT:    %[[S:.*]] = call @kiln_rows_1(%arg0)
// CHECK-NEXT:    %[[B:.*]] = call @kiln_rows_0(%arg1)
// CHECK-NEXT:    torch.aten.exp %arg2
// CHECK:         torch.aten.relu %arg1
// CHECK:       func.func private @kiln_rows_0
// CHECK-SAME:    steps = {{\[}}["exp", "f32", 0], ["mul", "f32", 1, 0], ["relu", "f32", 2], ["reciprocal", "f32", 3]]
// CHECK:       func.func private @kiln_rows_1
// CHECK-SAME:    steps = {{\[}}["amax", "f32", 0], ["sub", "f32", 0, 1], ["exp", "f32", 2], ["sum", "f32", 3], ["div", "f32", 3, 4]]
// CHECK:         %{{.*}}, %{{.*}} = torch.aten.max.dim %arg0
// CHECK-NOT:   func.func private @kiln_rows_2
module {
  func.func @softmax_and_chains(%x: !torch.vtensor<[4,16],f32>, %big: !torch.vtensor<[2048,1024],f32>, %small: !torch.vtensor<[1024,1024],f32>) -> (!torch.vtensor<[4,16],f32>, !torch.vtensor<[2048,1024],f32>, !torch.vtensor<[1024,1024],f32>, !torch.vtensor<[2048,1024],f32>) {
    %int-1 = torch.constant.int -1
    %int1 = torch.constant.int 1
    %none = torch.constant.none
    %true = torch.constant.bool true
    %values, %indices = torch.aten.max.dim %x, %int-1, %true : !torch.vtensor<[4,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4,1],f32>, !torch.vtensor<[4,1],si64>
    %shifted = torch.aten.sub.Tensor %x, %values, %int1 : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,1],f32>, !torch.int -> !torch.vtensor<[4,16],f32>
    %e = torch.aten.exp %shifted : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
    %dims = torch.prim.ListConstruct %int-1 : (!torch.int) -> !torch.list<int>
    %sum = torch.aten.sum.dim_IntList %e, %dims, %true, %none : !torch.vtensor<[4,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4,1],f32>
    %soft = torch.aten.div.Tensor %e, %sum : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,1],f32> -> !torch.vtensor<[4,16],f32>
    %be = torch.aten.exp %big : !torch.vtensor<[2048,1024],f32> -> !torch.vtensor<[2048,1024],f32>
    %bm = torch.aten.mul.Tensor %be, %big : !torch.vtensor<[2048,1024],f32>, !torch.vtensor<[2048,1024],f32> -> !torch.vtensor<[2048,1024],f32>
    %br = torch.aten.relu %bm : !torch.vtensor<[2048,1024],f32> -> !torch.vtensor<[2048,1024],f32>
    %bq = torch.aten.reciprocal %br : !torch.vtensor<[2048,1024],f32> -> !torch.vtensor<[2048,1024],f32>
    %se = torch.aten.exp %small : !torch.vtensor<[1024,1024],f32> -> !torch.vtensor<[1024,1024],f32>
    %sm = torch.aten.mul.Tensor %se, %small : !torch.vtensor<[1024,1024],f32>, !torch.vtensor<[1024,1024],f32> -> !torch.vtensor<[1024,1024],f32>
    %pr = torch.aten.relu %big : !torch.vtensor<[2048,1024],f32> -> !torch.vtensor<[2048,1024],f32>
    %pm = torch.aten.mul.Tensor %pr, %big : !torch.vtensor<[2048,1024],f32>, !torch.vtensor<[2048,1024],f32> -> !torch.vtensor<[2048,1024],f32>
    return %soft, %bq, %sm, %pm : !torch.vtensor<[4,16],f32>, !torch.vtensor<[2048,1024],f32>, !torch.vtensor<[1024,1024],f32>, !torch.vtensor<[2048,1024],f32>
  }
}

// -----

// A sum read outside the region before the region's last op (where the call goes) stays outside: the
// call could not give it to that reader. It is an input, and the call has one result.
// CHECK-LABEL: func.func @read_before_the_norm
// CHECK:         %[[H:.*]] = torch.aten.add.Tensor %arg0, %arg1
// CHECK-NEXT:    %[[U:.*]] = torch.aten.mul.Tensor %[[H]], %[[H]]
// CHECK-NEXT:    %[[N:.*]] = call @kiln_rows_0(%[[H]]) : (!torch.vtensor<[2,4,8],f32>) -> !torch.vtensor<[2,4,8],f32>
// CHECK-NEXT:    return %[[N]], %[[U]]
module {
  func.func @read_before_the_norm(%x: !torch.vtensor<[2,4,8],f32>, %r: !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>) {
    %none = torch.constant.none
    %true = torch.constant.bool true
    %int2 = torch.constant.int 2
    %int1 = torch.constant.int 1
    %h = torch.aten.add.Tensor %x, %r, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>, !torch.int -> !torch.vtensor<[2,4,8],f32>
    %u = torch.aten.mul.Tensor %h, %h : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32> -> !torch.vtensor<[2,4,8],f32>
    %dims = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
    %s = torch.aten.sum.dim_IntList %h, %dims, %true, %none : !torch.vtensor<[2,4,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,4,1],f32>
    %y = torch.aten.sub.Tensor %h, %s, %int1 : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,1],f32>, !torch.int -> !torch.vtensor<[2,4,8],f32>
    return %y, %u : !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,4,8],f32>
  }
}
