// RUN: kiln opt %s --pass outline-contractions --split-input-file | filecheck %s

// nn.Linear in bf16, as kiln's IR has it (an f32 mm of upcast bf16 values, W transposed): the call takes
// the bf16 values and W as it is; the outlined function describes a bf16 matmul with an f32 result and
// computes it with the same torch ops. A second identical matmul calls the same function.
// CHECK-LABEL: func.func @linear_bf16
// CHECK-NEXT:    %[[A:.*]] = call @kiln_mm_0(%arg0, %arg1) : (!torch.vtensor<[8,64],bf16>, !torch.vtensor<[32,64],bf16>) -> !torch.vtensor<[8,32],f32>
// CHECK-NEXT:    %[[B:.*]] = call @kiln_mm_0(%arg2, %arg1)
// CHECK-NEXT:    return %[[A]], %[[B]]
// CHECK:       func.func private @kiln_mm_0(%arg0: !torch.vtensor<[8,64],bf16>, %arg1: !torch.vtensor<[32,64],bf16>) -> !torch.vtensor<[8,32],f32>
// CHECK-SAME:    attributes {kiln.contraction = {b_layout = "nk", bias = false, dtype = "bf16", k = 64 : i64, kind = "mm", m = 8 : i64, n = 32 : i64, out_dtype = "f32", precision = ""}}
// CHECK-DAG:     %[[A32:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[8,64],f32>
// CHECK-DAG:     %[[W32:.*]] = torch.aten.to.dtype %arg1, {{.*}} -> !torch.vtensor<[32,64],f32>
// CHECK:         %[[WT:.*]] = torch.aten.permute %[[W32]], {{.*}} -> !torch.vtensor<[64,32],f32>
// CHECK:         %[[MM:.*]] = torch.aten.mm %[[A32]], %[[WT]] : {{.*}} -> !torch.vtensor<[8,32],f32>
// CHECK-NEXT:    return %[[MM]]
// CHECK-NOT:   func.func private @kiln_mm_1
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @linear_bf16(%x: !torch.vtensor<[8,64],bf16>, %w: !torch.vtensor<[32,64],bf16>, %y: !torch.vtensor<[8,64],bf16>) -> (!torch.vtensor<[8,32],f32>, !torch.vtensor<[8,32],f32>) {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int6 = torch.constant.int 6
    %false = torch.constant.bool false
    %none = torch.constant.none
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[32,64],bf16>, !torch.list<int> -> !torch.vtensor<[64,32],bf16>
    %wt32 = torch.aten.to.dtype %wt, %int6, %false, %false, %none : !torch.vtensor<[64,32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[64,32],f32>
    %x32 = torch.aten.to.dtype %x, %int6, %false, %false, %none : !torch.vtensor<[8,64],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[8,64],f32>
    %y32 = torch.aten.to.dtype %y, %int6, %false, %false, %none : !torch.vtensor<[8,64],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[8,64],f32>
    %a = torch.aten.mm %x32, %wt32 : !torch.vtensor<[8,64],f32>, !torch.vtensor<[64,32],f32> -> !torch.vtensor<[8,32],f32>
    %b = torch.aten.mm %y32, %wt32 : !torch.vtensor<[8,64],f32>, !torch.vtensor<[64,32],f32> -> !torch.vtensor<[8,32],f32>
    return %a, %b : !torch.vtensor<[8,32],f32>, !torch.vtensor<[8,32],f32>
  }
}

// -----

// f32 at matmul precision "high": a TF32 kernel. B given as [K, N] (not a transpose of a weight): "kn".
// The convolution (f32, stride 2, padding 1) is described with its geometry and cuDNN's TF32 default.
// CHECK-LABEL: func.func @f32_high
// CHECK:         call @kiln_mm_0(%arg0, %arg1) : (!torch.vtensor<[16,64],f32>, !torch.vtensor<[64,32],f32>) -> !torch.vtensor<[16,32],f32>
// CHECK:         call @kiln_conv2d_0(%arg2, %arg3) : (!torch.vtensor<[1,3,16,16],f32>, !torch.vtensor<[8,3,3,3],f32>) -> !torch.vtensor<[1,8,8,8],f32>
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    b_layout = "kn", bias = false, dtype = "f32", {{.*}} precision = "tf32"
// CHECK-NOT:     torch.aten.permute
// CHECK:         torch.aten.mm %arg0, %arg1
// CHECK:       func.func private @kiln_conv2d_0
// CHECK-SAME:    kiln.contraction = {bias = false, c = 3 : i64, dilation = [1, 1], dtype = "f32", groups = 1 : i64, h = 16 : i64, k_out = 8 : i64, kind = "conv2d", n = 1 : i64, out_dtype = "f32", padding = [1, 1], precision = "tf32", r = 3 : i64, s = 3 : i64, stride = [2, 2], w = 16 : i64}
// CHECK:         %[[Y:.*]] = torch.aten.convolution %arg0, %arg1, %none
// CHECK-NEXT:    return %[[Y]]
module attributes {kiln.matmul_precision = "high", kiln.conv_precision = "high"} {
  func.func @f32_high(%a: !torch.vtensor<[16,64],f32>, %b: !torch.vtensor<[64,32],f32>, %x: !torch.vtensor<[1,3,16,16],f32>, %w: !torch.vtensor<[8,3,3,3],f32>) -> (!torch.vtensor<[16,32],f32>, !torch.vtensor<[1,8,8,8],f32>) {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %mm = torch.aten.mm %a, %b : !torch.vtensor<[16,64],f32>, !torch.vtensor<[64,32],f32> -> !torch.vtensor<[16,32],f32>
    %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %y = torch.aten.convolution %x, %w, %none, %stride, %ones, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,3,16,16],f32>, !torch.vtensor<[8,3,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,8,8],f32>
    return %mm, %y : !torch.vtensor<[16,32],f32>, !torch.vtensor<[1,8,8,8],f32>
  }
}

// -----

// One weight broadcast to every batch of a bmm (nn.MultiheadAttention's in-projection): one matmul of
// batch x rows, outlined, with views around it.
// CHECK-LABEL: func.func @broadcast_bmm
// CHECK:         %[[FLAT:.*]] = torch.aten.view %arg0, {{.*}} -> !torch.vtensor<[64,16],bf16>
// CHECK:         %[[MM:.*]] = call @kiln_mm_0(%[[FLAT]], %arg1) : (!torch.vtensor<[64,16],bf16>, !torch.vtensor<[24,16],bf16>) -> !torch.vtensor<[64,24],bf16>
// CHECK:         %[[Y:.*]] = torch.aten.view %[[MM]], {{.*}} -> !torch.vtensor<[8,8,24],bf16>
// CHECK-NOT:     torch.aten.bmm
// CHECK-NOT:     torch.aten.broadcast_to
// CHECK:         return %[[Y]]
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    m = 64 : i64, n = 24 : i64, out_dtype = "bf16"
module {
  func.func @broadcast_bmm(%x: !torch.vtensor<[8,8,16],bf16>, %w: !torch.vtensor<[24,16],bf16>) -> !torch.vtensor<[8,8,24],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int8 = torch.constant.int 8
    %int16 = torch.constant.int 16
    %int24 = torch.constant.int 24
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[24,16],bf16>, !torch.list<int> -> !torch.vtensor<[16,24],bf16>
    %shape = torch.prim.ListConstruct %int8, %int16, %int24 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %wb = torch.aten.broadcast_to %wt, %shape : !torch.vtensor<[16,24],bf16>, !torch.list<int> -> !torch.vtensor<[8,16,24],bf16>
    %y = torch.aten.bmm %x, %wb : !torch.vtensor<[8,8,16],bf16>, !torch.vtensor<[8,16,24],bf16> -> !torch.vtensor<[8,8,24],bf16>
    return %y : !torch.vtensor<[8,8,24],bf16>
  }
}

// -----

// The same with its bias, added in bf16 after the view back to [batch, rows, 24]: the add moves before
// the view, onto the matmul's rows, and the kernel adds the bias (bias = true; IREE's fallback adds it
// in bf16 as the graph did).
// CHECK-LABEL: func.func @broadcast_bmm_bias
// CHECK:         %[[MM:.*]] = call @kiln_mm_0(%{{.*}}, %arg1, %arg2) : (!torch.vtensor<[64,16],bf16>, !torch.vtensor<[24,16],bf16>, !torch.vtensor<[24],bf16>) -> !torch.vtensor<[64,24],bf16>
// CHECK:         %[[Y:.*]] = torch.aten.view %[[MM]], {{.*}} -> !torch.vtensor<[8,8,24],bf16>
// CHECK-NOT:     torch.aten.add.Tensor
// CHECK:         return %[[Y]]
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    bias = true, dtype = "bf16", {{.*}} m = 64 : i64, n = 24 : i64, out_dtype = "bf16"
// CHECK:         %[[P:.*]] = torch.aten.mm
// CHECK-NEXT:    %[[B:.*]] = torch.aten.add.Tensor %[[P]], %arg2, {{.*}} -> !torch.vtensor<[64,24],bf16>
// CHECK-NEXT:    return %[[B]]
module {
  func.func @broadcast_bmm_bias(%x: !torch.vtensor<[8,8,16],bf16>, %w: !torch.vtensor<[24,16],bf16>, %b: !torch.vtensor<[24],bf16>) -> !torch.vtensor<[8,8,24],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int8 = torch.constant.int 8
    %int16 = torch.constant.int 16
    %int24 = torch.constant.int 24
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[24,16],bf16>, !torch.list<int> -> !torch.vtensor<[16,24],bf16>
    %shape = torch.prim.ListConstruct %int8, %int16, %int24 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %wb = torch.aten.broadcast_to %wt, %shape : !torch.vtensor<[16,24],bf16>, !torch.list<int> -> !torch.vtensor<[8,16,24],bf16>
    %y = torch.aten.bmm %x, %wb : !torch.vtensor<[8,8,16],bf16>, !torch.vtensor<[8,16,24],bf16> -> !torch.vtensor<[8,8,24],bf16>
    %z = torch.aten.add.Tensor %y, %b, %int1 : !torch.vtensor<[8,8,24],bf16>, !torch.vtensor<[24],bf16>, !torch.int -> !torch.vtensor<[8,8,24],bf16>
    return %z : !torch.vtensor<[8,8,24],bf16>
  }
}

// -----

// A depthwise convolution (groups = channels, one 3x3 filter each; MobileNet's), bf16 and f32: the
// f32 one computes in plain f32 FMAs ("ieee"), whatever the convolution precision.
// CHECK-LABEL: func.func @depthwise
// CHECK:         call @kiln_conv2d_0(%arg0, %arg1) : (!torch.vtensor<[2,32,8,8],bf16>, !torch.vtensor<[32,1,3,3],bf16>) -> !torch.vtensor<[2,32,4,4],bf16>
// CHECK:         call @kiln_conv2d_1(%arg2, %arg3) : (!torch.vtensor<[2,32,8,8],f32>, !torch.vtensor<[32,1,3,3],f32>) -> !torch.vtensor<[2,32,4,4],f32>
// CHECK:       func.func private @kiln_conv2d_0
// CHECK-SAME:    c = 32 : i64, {{.*}} dtype = "bf16", groups = 32 : i64, {{.*}} k_out = 32 : i64, kind = "conv2d", {{.*}} precision = "", {{.*}} stride = [2, 2]
// CHECK:         %[[G:.*]] = torch.constant.int 32
// CHECK:         torch.aten.convolution %arg0, %arg1, %none, {{.*}}, %[[G]]
// CHECK:       func.func private @kiln_conv2d_1
// CHECK-SAME:    dtype = "f32", groups = 32 : i64, {{.*}} precision = "ieee"
module {
  func.func @depthwise(%x: !torch.vtensor<[2,32,8,8],bf16>, %w: !torch.vtensor<[32,1,3,3],bf16>, %x32: !torch.vtensor<[2,32,8,8],f32>, %w32: !torch.vtensor<[32,1,3,3],f32>) -> (!torch.vtensor<[2,32,4,4],bf16>, !torch.vtensor<[2,32,4,4],f32>) {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int32 = torch.constant.int 32
    %twos = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %y = torch.aten.convolution %x, %w, %none, %twos, %ones, %ones, %false, %zeros, %int32 : !torch.vtensor<[2,32,8,8],bf16>, !torch.vtensor<[32,1,3,3],bf16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[2,32,4,4],bf16>
    %y32 = torch.aten.convolution %x32, %w32, %none, %twos, %ones, %ones, %false, %zeros, %int32 : !torch.vtensor<[2,32,8,8],f32>, !torch.vtensor<[32,1,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[2,32,4,4],f32>
    return %y, %y32 : !torch.vtensor<[2,32,4,4],bf16>, !torch.vtensor<[2,32,4,4],f32>
  }
}

// -----

// A grouped convolution (2 groups of 2 channels; RegNet's and ResNeXt's 3x3s are 64 channels a group):
// one implicit GEMM a group, in one kernel.
// CHECK-LABEL: func.func @grouped
// CHECK:         call @kiln_conv2d_0(%arg0, %arg1) : (!torch.vtensor<[1,4,8,8],f32>, !torch.vtensor<[4,2,3,3],f32>) -> !torch.vtensor<[1,4,8,8],f32>
// CHECK:       func.func private @kiln_conv2d_0
// CHECK-SAME:    c = 4 : i64, {{.*}} groups = 2 : i64, {{.*}} k_out = 4 : i64, kind = "conv2d", {{.*}} precision = "tf32"
// CHECK:         %[[G:.*]] = torch.constant.int 2
// CHECK:         torch.aten.convolution %arg0, %arg1, %none, {{.*}}, %[[G]]
module {
  func.func @grouped(%x: !torch.vtensor<[1,4,8,8],f32>, %w: !torch.vtensor<[4,2,3,3],f32>) -> !torch.vtensor<[1,4,8,8],f32> {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %y = torch.aten.convolution %x, %w, %none, %ones, %ones, %ones, %false, %zeros, %int2 : !torch.vtensor<[1,4,8,8],f32>, !torch.vtensor<[4,2,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,4,8,8],f32>
    return %y : !torch.vtensor<[1,4,8,8],f32>
  }
}

// -----

// A convolution's channel epilogue goes into its function: batch norm's per-channel steps (the
// vectors [C, 1, 1] become operands), a rounding back to bf16, then ReLU6 as maximum/minimum by
// constants. The call replaces the last of them; the body replays them after the convolution.
// A convolution read twice keeps its epilogue outside (here: relu and an add of the result).
// CHECK-LABEL: func.func @epilogue
// CHECK:         %[[Y:.*]] = call @kiln_conv2d_0(%arg0, %arg1, %arg2, %arg3) : (!torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[8,8,1,1],bf16>, !torch.vtensor<[8,1,1],f32>, !torch.vtensor<[8,1,1],bf16>) -> !torch.vtensor<[1,8,4,4],bf16>
// CHECK-NOT:     torch.aten.minimum
// CHECK:         %[[Z:.*]] = call @kiln_conv2d_0(%arg0, %arg1, %arg2, %arg3)
// CHECK:         %[[T:.*]] = call @kiln_conv2d_1(%[[Z]], %arg1)
// CHECK:         torch.aten.relu %[[T]]
// CHECK:       func.func private @kiln_conv2d_0
// CHECK-SAME:    clamp = [0.000000e+00, 6.000000e+00], {{.*}} epilogue = ["sub", "mul"], {{.*}} out_dtype = "bf16"
// CHECK:         %[[C:.*]] = torch.aten.convolution %arg0, %arg1
// CHECK:         %[[S:.*]] = torch.aten.sub.Tensor %[[C]], %arg2
// CHECK:         %[[M:.*]] = torch.aten.mul.Tensor %[[S]], %arg3
// CHECK:         %[[R:.*]] = torch.aten.to.dtype %[[M]]
// CHECK:         %[[LO:.*]] = torch.aten.maximum %[[R]]
// CHECK:         %[[HI:.*]] = torch.aten.minimum %{{.*}}, %[[LO]]
// CHECK-NEXT:    return %[[HI]]
// CHECK:       func.func private @kiln_conv2d_1
// CHECK-NOT:     epilogue
module {
  func.func @epilogue(%x: !torch.vtensor<[1,8,4,4],bf16>, %w: !torch.vtensor<[8,8,1,1],bf16>, %mean: !torch.vtensor<[8,1,1],f32>, %gamma: !torch.vtensor<[8,1,1],bf16>) -> (!torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[1,8,4,4],bf16>) {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int15 = torch.constant.int 15
    %zero = torch.vtensor.literal(dense<0.000000e+00> : tensor<bf16>) : !torch.vtensor<[],bf16>
    %six = torch.vtensor.literal(dense<6.000000e+00> : tensor<bf16>) : !torch.vtensor<[],bf16>
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %y = torch.aten.convolution %x, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[8,8,1,1],bf16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,4,4],bf16>
    %s = torch.aten.sub.Tensor %y, %mean, %int1 : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[8,1,1],f32>, !torch.int -> !torch.vtensor<[1,8,4,4],f32>
    %m = torch.aten.mul.Tensor %s, %gamma : !torch.vtensor<[1,8,4,4],f32>, !torch.vtensor<[8,1,1],bf16> -> !torch.vtensor<[1,8,4,4],f32>
    %r = torch.aten.to.dtype %m, %int15, %false, %false, %none : !torch.vtensor<[1,8,4,4],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[1,8,4,4],bf16>
    %lo = torch.aten.maximum %r, %zero : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[],bf16> -> !torch.vtensor<[1,8,4,4],bf16>
    %hi = torch.aten.minimum %six, %lo : !torch.vtensor<[],bf16>, !torch.vtensor<[1,8,4,4],bf16> -> !torch.vtensor<[1,8,4,4],bf16>
    %y2 = torch.aten.convolution %x, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[8,8,1,1],bf16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,4,4],bf16>
    %s2 = torch.aten.sub.Tensor %y2, %mean, %int1 : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[8,1,1],f32>, !torch.int -> !torch.vtensor<[1,8,4,4],f32>
    %m2 = torch.aten.mul.Tensor %s2, %gamma : !torch.vtensor<[1,8,4,4],f32>, !torch.vtensor<[8,1,1],bf16> -> !torch.vtensor<[1,8,4,4],f32>
    %r2 = torch.aten.to.dtype %m2, %int15, %false, %false, %none : !torch.vtensor<[1,8,4,4],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[1,8,4,4],bf16>
    %lo2 = torch.aten.maximum %r2, %zero : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[],bf16> -> !torch.vtensor<[1,8,4,4],bf16>
    %hi2 = torch.aten.minimum %six, %lo2 : !torch.vtensor<[],bf16>, !torch.vtensor<[1,8,4,4],bf16> -> !torch.vtensor<[1,8,4,4],bf16>
    %twice = torch.aten.convolution %hi2, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[8,8,1,1],bf16>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8,4,4],bf16>
    %relu = torch.aten.relu %twice : !torch.vtensor<[1,8,4,4],bf16> -> !torch.vtensor<[1,8,4,4],bf16>
    %sum = torch.aten.add.Tensor %relu, %twice, %int1 : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[1,8,4,4],bf16>, !torch.int -> !torch.vtensor<[1,8,4,4],bf16>
    return %hi, %sum : !torch.vtensor<[1,8,4,4],bf16>, !torch.vtensor<[1,8,4,4],bf16>
  }
}

// -----

// Max pooling (floor mode) is outlined like a convolution; ceil mode is left to IREE.
// CHECK-LABEL: func.func @max_pool
// CHECK:         call @kiln_maxpool2d_0(%arg0) : (!torch.vtensor<[2,16,8,8],f32>) -> !torch.vtensor<[2,16,4,4],f32>
// CHECK:         torch.aten.max_pool2d %arg0, {{.*}}, %true
// CHECK:       func.func private @kiln_maxpool2d_0
// CHECK-SAME:    kiln.contraction = {c = 16 : i64, dilation = [1, 1], dtype = "f32", h = 8 : i64, kind = "maxpool2d", n = 2 : i64, padding = [1, 1], r = 3 : i64, s = 3 : i64, stride = [2, 2], w = 8 : i64}
// CHECK:         torch.aten.max_pool2d %arg0
module {
  func.func @max_pool(%x: !torch.vtensor<[2,16,8,8],f32>) -> (!torch.vtensor<[2,16,4,4],f32>, !torch.vtensor<[2,16,5,5],f32>) {
    %false = torch.constant.bool false
    %true = torch.constant.bool true
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int3 = torch.constant.int 3
    %window = torch.prim.ListConstruct %int3, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
    %twos = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %y = torch.aten.max_pool2d %x, %window, %twos, %ones, %ones, %false : !torch.vtensor<[2,16,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[2,16,4,4],f32>
    %z = torch.aten.max_pool2d %x, %window, %twos, %ones, %ones, %true : !torch.vtensor<[2,16,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[2,16,5,5],f32>
    return %y, %z : !torch.vtensor<[2,16,4,4],f32>, !torch.vtensor<[2,16,5,5],f32>
  }
}

// -----

// Must not fire: a transposed convolution, dynamic shapes, a mixed-precision mm
// (only one operand upcast).
// CHECK-LABEL: func.func @not_eligible
// CHECK-NOT:     call @kiln
// CHECK:         torch.aten.convolution
// CHECK:         torch.aten.mm
// CHECK:         torch.aten.mm
// CHECK-NOT:   func.func private
module {
  func.func @not_eligible(%x: !torch.vtensor<[1,4,8,8],f32>, %w: !torch.vtensor<[4,4,3,3],f32>, %a: !torch.vtensor<[?,64],f32>, %b: !torch.vtensor<[64,32],f32>, %c: !torch.vtensor<[8,64],f32>, %d: !torch.vtensor<[64,32],bf16>) -> (!torch.vtensor<[1,4,8,8],f32>, !torch.vtensor<[?,32],f32>, !torch.vtensor<[8,32],f32>) {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int6 = torch.constant.int 6
    %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
    %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %true = torch.constant.bool true
    %y = torch.aten.convolution %x, %w, %none, %ones, %ones, %ones, %true, %zeros, %int1 : !torch.vtensor<[1,4,8,8],f32>, !torch.vtensor<[4,4,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,4,8,8],f32>
    %mm = torch.aten.mm %a, %b : !torch.vtensor<[?,64],f32>, !torch.vtensor<[64,32],f32> -> !torch.vtensor<[?,32],f32>
    %d32 = torch.aten.to.dtype %d, %int6, %false, %false, %none : !torch.vtensor<[64,32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[64,32],f32>
    %mixed = torch.aten.mm %c, %d32 : !torch.vtensor<[8,64],f32>, !torch.vtensor<[64,32],f32> -> !torch.vtensor<[8,32],f32>
    return %y, %mm, %mixed : !torch.vtensor<[1,4,8,8],f32>, !torch.vtensor<[?,32],f32>, !torch.vtensor<[8,32],f32>
  }
}

// -----

// Attention as GPT-2 code writes it: heads moved forward from [batch, seq, heads, dim] for Q, K and V,
// and the result moved back. The function takes the tensors before the permutes, returns the result
// after it ("bshd" both ways), and computes it with the same torch ops. The default scale is written out.
// CHECK-LABEL: func.func @causal_heads_last
// CHECK-NEXT:    %[[Y:.*]] = call @kiln_attention_0(%arg0, %arg1, %arg2) : (!torch.vtensor<[2,16,4,32],bf16>, !torch.vtensor<[2,16,4,32],bf16>, !torch.vtensor<[2,16,4,32],bf16>) -> !torch.vtensor<[2,16,4,32],bf16>
// CHECK-NEXT:    return %[[Y]]
// CHECK:       func.func private @kiln_attention_0
// CHECK-SAME:    kiln.contraction = {batch = 2 : i64, causal = true, dtype = "bf16", head_dim = 32 : i64, heads = 4 : i64, kind = "attention", layout = "bshd", out_layout = "bshd", precision = "", scale = 0.17677669529663689 : f64, seq_k = 16 : i64, seq_q = 16 : i64}
// CHECK-COUNT-3: torch.aten.permute %arg{{[0-2]}}
// CHECK:         %[[A:.*]] = torch.aten.scaled_dot_product_attention {{.*}} -> !torch.vtensor<[2,4,16,32],bf16>
// CHECK:         %[[P:.*]] = torch.aten.permute %[[A]], {{.*}} -> !torch.vtensor<[2,16,4,32],bf16>
// CHECK-NEXT:    return %[[P]]
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @causal_heads_last(%q: !torch.vtensor<[2,16,4,32],bf16>, %k: !torch.vtensor<[2,16,4,32],bf16>, %v: !torch.vtensor<[2,16,4,32],bf16>) -> !torch.vtensor<[2,16,4,32],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int3 = torch.constant.int 3
    %none = torch.constant.none
    %true = torch.constant.bool true
    %false = torch.constant.bool false
    %float0 = torch.constant.float 0.000000e+00
    %order = torch.prim.ListConstruct %int0, %int2, %int1, %int3 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %qt = torch.aten.permute %q, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %kt = torch.aten.permute %k, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %vt = torch.aten.permute %v, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %a = torch.aten.scaled_dot_product_attention %qt, %kt, %vt, %none, %float0, %true, %none, %false : !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[2,4,16,32],bf16>
    %y = torch.aten.permute %a, %order : !torch.vtensor<[2,4,16,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    return %y : !torch.vtensor<[2,16,4,32],bf16>
  }
}

// -----

// Grouped heads as transformers' repeat_kv writes them (Llama: 4 query heads on 2 key/value heads):
// K and V are unsqueezed, broadcast to [b, kv_heads, group, s, d] and viewed as [b, heads, s, d]. The
// function takes them unrepeated (kv_group 2) and repeats them itself for IREE's attention.
// CHECK-LABEL: func.func @grouped_heads
// CHECK-NEXT:    %[[Y:.*]] = call @kiln_attention_0(%arg0, %arg1, %arg2) : (!torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,2,16,32],bf16>, !torch.vtensor<[2,2,16,32],bf16>) -> !torch.vtensor<[2,4,16,32],bf16>
// CHECK-NEXT:    return %[[Y]]
// CHECK:       func.func private @kiln_attention_0
// CHECK-SAME:    heads = 4 : i64, kind = "attention", kv_group = 2 : i64, layout = "bhsd"
// CHECK-COUNT-2: torch.aten.broadcast_to {{.*}} -> !torch.vtensor<[2,2,2,16,32],bf16>
// CHECK:         torch.aten.scaled_dot_product_attention {{.*}} : !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @grouped_heads(%q: !torch.vtensor<[2,4,16,32],bf16>, %k: !torch.vtensor<[2,2,16,32],bf16>, %v: !torch.vtensor<[2,2,16,32],bf16>) -> !torch.vtensor<[2,4,16,32],bf16> {
    %int2 = torch.constant.int 2
    %int4 = torch.constant.int 4
    %int16 = torch.constant.int 16
    %int32 = torch.constant.int 32
    %none = torch.constant.none
    %true = torch.constant.bool true
    %false = torch.constant.bool false
    %float0 = torch.constant.float 0.000000e+00
    %ku = torch.aten.unsqueeze %k, %int2 : !torch.vtensor<[2,2,16,32],bf16>, !torch.int -> !torch.vtensor<[2,2,1,16,32],bf16>
    %repeated = torch.prim.ListConstruct %int2, %int2, %int2, %int16, %int32 : (!torch.int, !torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %kb = torch.aten.broadcast_to %ku, %repeated : !torch.vtensor<[2,2,1,16,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,2,2,16,32],bf16>
    %heads = torch.prim.ListConstruct %int2, %int4, %int16, %int32 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %kr = torch.aten.view %kb, %heads : !torch.vtensor<[2,2,2,16,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %vu = torch.aten.unsqueeze %v, %int2 : !torch.vtensor<[2,2,16,32],bf16>, !torch.int -> !torch.vtensor<[2,2,1,16,32],bf16>
    %vb = torch.aten.broadcast_to %vu, %repeated : !torch.vtensor<[2,2,1,16,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,2,2,16,32],bf16>
    %vr = torch.aten.view %vb, %heads : !torch.vtensor<[2,2,2,16,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %a = torch.aten.scaled_dot_product_attention %q, %kr, %vr, %none, %float0, %true, %none, %false : !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[2,4,16,32],bf16>
    return %a : !torch.vtensor<[2,4,16,32],bf16>
  }
}

// -----

// GPT-2's fused QKV projection split in three: Q, K and V are slices of one [2, 16, 384] tensor. The
// function takes that tensor for each (layout "strided": `sources`, and `views` [offset, batch, head,
// seq strides]: no slice is copied) and replays the slices, views and permutes itself; a split whose
// start is not on 16 bytes (offset 1) is copied as before (layout "bshd" over the views).
// CHECK-LABEL: func.func @packed_qkv
// CHECK-NEXT:    %[[Y:.*]] = call @kiln_attention_0(%arg0, %arg0, %arg0) : (!torch.vtensor<[2,16,384],bf16>, !torch.vtensor<[2,16,384],bf16>, !torch.vtensor<[2,16,384],bf16>) -> !torch.vtensor<[2,16,4,32],bf16>
// CHECK-NEXT:    return %[[Y]]
// CHECK-LABEL: func.func @misaligned_split
// CHECK-COUNT-3: torch.aten.slice.Tensor
// CHECK:         call @kiln_attention_1(%{{.*}}, %{{.*}}, %{{.*}}) : (!torch.vtensor<[2,16,4,32],bf16>, !torch.vtensor<[2,16,4,32],bf16>, !torch.vtensor<[2,16,4,32],bf16>)
// CHECK:       func.func private @kiln_attention_0
// CHECK-SAME:    layout = "strided", out_layout = "bshd"
// CHECK-SAME:    sources = {{\[}}[2, 16, 384], [2, 16, 384], [2, 16, 384]], views = {{\[}}[0, 6144, 32, 384], [128, 6144, 32, 384], [256, 6144, 32, 384]]
// CHECK:         torch.aten.slice.Tensor %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : {{.*}} -> !torch.vtensor<[2,16,128],bf16>
// CHECK:         torch.aten.view
// CHECK:         torch.aten.permute
// CHECK:         torch.aten.slice.Tensor %arg1
// CHECK:         torch.aten.slice.Tensor %arg2
// CHECK:         torch.aten.scaled_dot_product_attention
// CHECK:       func.func private @kiln_attention_1
// CHECK-SAME:    layout = "bshd"
// CHECK-NOT:     views
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @packed_qkv(%x: !torch.vtensor<[2,16,384],bf16>) -> !torch.vtensor<[2,16,4,32],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int3 = torch.constant.int 3
    %int4 = torch.constant.int 4
    %int16 = torch.constant.int 16
    %int32 = torch.constant.int 32
    %int128 = torch.constant.int 128
    %int256 = torch.constant.int 256
    %int384 = torch.constant.int 384
    %none = torch.constant.none
    %true = torch.constant.bool true
    %false = torch.constant.bool false
    %float0 = torch.constant.float 0.000000e+00
    %q0 = torch.aten.slice.Tensor %x, %int2, %int0, %int128, %int1 : !torch.vtensor<[2,16,384],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,16,128],bf16>
    %k0 = torch.aten.slice.Tensor %x, %int2, %int128, %int256, %int1 : !torch.vtensor<[2,16,384],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,16,128],bf16>
    %v0 = torch.aten.slice.Tensor %x, %int2, %int256, %int384, %int1 : !torch.vtensor<[2,16,384],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,16,128],bf16>
    %shape = torch.prim.ListConstruct %int2, %int16, %int4, %int32 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %q = torch.aten.view %q0, %shape : !torch.vtensor<[2,16,128],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    %k = torch.aten.view %k0, %shape : !torch.vtensor<[2,16,128],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    %v = torch.aten.view %v0, %shape : !torch.vtensor<[2,16,128],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    %order = torch.prim.ListConstruct %int0, %int2, %int1, %int3 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %qt = torch.aten.permute %q, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %kt = torch.aten.permute %k, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %vt = torch.aten.permute %v, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %a = torch.aten.scaled_dot_product_attention %qt, %kt, %vt, %none, %float0, %true, %none, %false : !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[2,4,16,32],bf16>
    %y = torch.aten.permute %a, %order : !torch.vtensor<[2,4,16,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    return %y : !torch.vtensor<[2,16,4,32],bf16>
  }
  func.func @misaligned_split(%x: !torch.vtensor<[2,16,385],bf16>) -> !torch.vtensor<[2,16,4,32],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int3 = torch.constant.int 3
    %int4 = torch.constant.int 4
    %int16 = torch.constant.int 16
    %int32 = torch.constant.int 32
    %int129 = torch.constant.int 129
    %int257 = torch.constant.int 257
    %int385 = torch.constant.int 385
    %none = torch.constant.none
    %true = torch.constant.bool true
    %false = torch.constant.bool false
    %float0 = torch.constant.float 0.000000e+00
    %q0 = torch.aten.slice.Tensor %x, %int2, %int1, %int129, %int1 : !torch.vtensor<[2,16,385],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,16,128],bf16>
    %k0 = torch.aten.slice.Tensor %x, %int2, %int129, %int257, %int1 : !torch.vtensor<[2,16,385],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,16,128],bf16>
    %v0 = torch.aten.slice.Tensor %x, %int2, %int257, %int385, %int1 : !torch.vtensor<[2,16,385],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,16,128],bf16>
    %shape = torch.prim.ListConstruct %int2, %int16, %int4, %int32 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %q = torch.aten.view %q0, %shape : !torch.vtensor<[2,16,128],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    %k = torch.aten.view %k0, %shape : !torch.vtensor<[2,16,128],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    %v = torch.aten.view %v0, %shape : !torch.vtensor<[2,16,128],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    %order = torch.prim.ListConstruct %int0, %int2, %int1, %int3 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %qt = torch.aten.permute %q, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %kt = torch.aten.permute %k, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %vt = torch.aten.permute %v, %order : !torch.vtensor<[2,16,4,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16,32],bf16>
    %a = torch.aten.scaled_dot_product_attention %qt, %kt, %vt, %none, %float0, %true, %none, %false : !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[2,4,16,32],bf16>
    %y = torch.aten.permute %a, %order : !torch.vtensor<[2,4,16,32],bf16>, !torch.list<int> -> !torch.vtensor<[2,16,4,32],bf16>
    return %y : !torch.vtensor<[2,16,4,32],bf16>
  }
}

// -----

// f32 attention as SDPA takes it, with a given scale: "bhsd", the matmul precision's kernel (tf32x3 at
// "highest"). With an additive mask tensor too (described by its dtype and shape); one whose head
// dimension (40, not a multiple of 16) the kernel does not take stays.
// CHECK-LABEL: func.func @f32_scaled
// CHECK:         call @kiln_attention_0(%arg0, %arg1, %arg2) : (!torch.vtensor<[1,2,8,64],f32>, !torch.vtensor<[1,2,12,64],f32>, !torch.vtensor<[1,2,12,64],f32>) -> !torch.vtensor<[1,2,8,64],f32>
// CHECK:         call @kiln_attention_1(%arg0, %arg1, %arg2, %arg3) : ({{.*}}, !torch.vtensor<[1,2,8,12],f32>) -> !torch.vtensor<[1,2,8,64],f32>
// CHECK:         torch.aten.scaled_dot_product_attention %arg4, %arg4, %arg4, %none
// CHECK:       func.func private @kiln_attention_0
// CHECK-SAME:    causal = false, dtype = "f32", head_dim = 64 : i64, heads = 2 : i64, kind = "attention", layout = "bhsd", out_layout = "bhsd", precision = "tf32x3", scale = 5.000000e-01 : f64, seq_k = 12 : i64, seq_q = 8 : i64
// CHECK-NOT:     torch.aten.permute
// CHECK:         torch.aten.scaled_dot_product_attention %arg0, %arg1, %arg2
// CHECK:       func.func private @kiln_attention_1
// CHECK-SAME:    mask = "f32", mask_shape = [1, 2, 8, 12]
// CHECK:         %[[M:.*]] = torch.aten.expand %arg3
// CHECK:         torch.aten.scaled_dot_product_attention %arg0, %arg1, %arg2, %[[M]]
// CHECK-NOT:   func.func private @kiln_attention_2
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @f32_scaled(%q: !torch.vtensor<[1,2,8,64],f32>, %k: !torch.vtensor<[1,2,12,64],f32>, %v: !torch.vtensor<[1,2,12,64],f32>, %mask: !torch.vtensor<[1,2,8,12],f32>, %x: !torch.vtensor<[1,2,8,40],f32>) -> (!torch.vtensor<[1,2,8,64],f32>, !torch.vtensor<[1,2,8,64],f32>, !torch.vtensor<[1,2,8,40],f32>) {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %float0 = torch.constant.float 0.000000e+00
    %half = torch.constant.float 5.000000e-01
    %a = torch.aten.scaled_dot_product_attention %q, %k, %v, %none, %float0, %false, %half, %false : !torch.vtensor<[1,2,8,64],f32>, !torch.vtensor<[1,2,12,64],f32>, !torch.vtensor<[1,2,12,64],f32>, !torch.none, !torch.float, !torch.bool, !torch.float, !torch.bool -> !torch.vtensor<[1,2,8,64],f32>
    %b = torch.aten.scaled_dot_product_attention %q, %k, %v, %mask, %float0, %false, %half, %false : !torch.vtensor<[1,2,8,64],f32>, !torch.vtensor<[1,2,12,64],f32>, !torch.vtensor<[1,2,12,64],f32>, !torch.vtensor<[1,2,8,12],f32>, !torch.float, !torch.bool, !torch.float, !torch.bool -> !torch.vtensor<[1,2,8,64],f32>
    %c = torch.aten.scaled_dot_product_attention %x, %x, %x, %none, %float0, %false, %none, %false : !torch.vtensor<[1,2,8,40],f32>, !torch.vtensor<[1,2,8,40],f32>, !torch.vtensor<[1,2,8,40],f32>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[1,2,8,40],f32>
    return %a, %b, %c : !torch.vtensor<[1,2,8,64],f32>, !torch.vtensor<[1,2,8,64],f32>, !torch.vtensor<[1,2,8,40],f32>
  }
}

// -----

// nn.Linear with its bias in bf16, as kiln's IR has it (f32 from upcast bf16 values, the bias added in
// f32, rounded back to bf16 once): the kernel takes the bias (bf16) and rounds once too, so the call
// returns the bf16 result (the call goes where the result was made: the bias may be computed after the
// matmul, as GPT-2's Conv1D has it). In f32, a bias added to a matmul that something else also reads stays outside.
// CHECK-LABEL: func.func @linear_bias
// CHECK:         %[[NEG:.*]] = torch.aten.neg %arg2
// CHECK-NEXT:    %[[Y:.*]] = call @kiln_mm_0(%arg0, %arg1, %[[NEG]]) : (!torch.vtensor<[8,64],bf16>, !torch.vtensor<[32,64],bf16>, !torch.vtensor<[32],bf16>) -> !torch.vtensor<[8,32],bf16>
// CHECK:         %[[MM:.*]] = call @kiln_mm_1(%arg3, %arg4) : (!torch.vtensor<[8,64],f32>, !torch.vtensor<[32,64],f32>) -> !torch.vtensor<[8,32],f32>
// CHECK-NEXT:    %[[B:.*]] = torch.aten.add.Tensor %[[MM]], %arg5
// CHECK-NEXT:    return %[[Y]], %[[B]], %[[MM]]
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    {b_layout = "nk", bias = true, dtype = "bf16", k = 64 : i64, kind = "mm", m = 8 : i64, n = 32 : i64, out_dtype = "bf16", precision = ""}
// CHECK:         %[[P:.*]] = torch.aten.mm
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg2, {{.*}} -> !torch.vtensor<[32],f32>
// CHECK:         %[[A:.*]] = torch.aten.add.Tensor %[[P]], %[[UP]], {{.*}} -> !torch.vtensor<[8,32],f32>
// CHECK:         %[[R:.*]] = torch.aten.to.dtype %[[A]], {{.*}} -> !torch.vtensor<[8,32],bf16>
// CHECK-NEXT:    return %[[R]]
// CHECK:       func.func private @kiln_mm_1
// CHECK-SAME:    bias = false
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @linear_bias(%x: !torch.vtensor<[8,64],bf16>, %w: !torch.vtensor<[32,64],bf16>, %b: !torch.vtensor<[32],bf16>, %x32: !torch.vtensor<[8,64],f32>, %w32: !torch.vtensor<[32,64],f32>, %b32: !torch.vtensor<[32],f32>) -> (!torch.vtensor<[8,32],bf16>, !torch.vtensor<[8,32],f32>, !torch.vtensor<[8,32],f32>) {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int6 = torch.constant.int 6
    %int15 = torch.constant.int 15
    %false = torch.constant.bool false
    %none = torch.constant.none
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[32,64],bf16>, !torch.list<int> -> !torch.vtensor<[64,32],bf16>
    %wt_up = torch.aten.to.dtype %wt, %int6, %false, %false, %none : !torch.vtensor<[64,32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[64,32],f32>
    %x_up = torch.aten.to.dtype %x, %int6, %false, %false, %none : !torch.vtensor<[8,64],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[8,64],f32>
    %mm = torch.aten.mm %x_up, %wt_up : !torch.vtensor<[8,64],f32>, !torch.vtensor<[64,32],f32> -> !torch.vtensor<[8,32],f32>
    %bn = torch.aten.neg %b : !torch.vtensor<[32],bf16> -> !torch.vtensor<[32],bf16>
    %b_up = torch.aten.to.dtype %bn, %int6, %false, %false, %none : !torch.vtensor<[32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[32],f32>
    %add = torch.aten.add.Tensor %mm, %b_up, %int1 : !torch.vtensor<[8,32],f32>, !torch.vtensor<[32],f32>, !torch.int -> !torch.vtensor<[8,32],f32>
    %y = torch.aten.to.dtype %add, %int15, %false, %false, %none : !torch.vtensor<[8,32],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[8,32],bf16>
    %wt32 = torch.aten.permute %w32, %swap : !torch.vtensor<[32,64],f32>, !torch.list<int> -> !torch.vtensor<[64,32],f32>
    %mm32 = torch.aten.mm %x32, %wt32 : !torch.vtensor<[8,64],f32>, !torch.vtensor<[64,32],f32> -> !torch.vtensor<[8,32],f32>
    %add32 = torch.aten.add.Tensor %mm32, %b32, %int1 : !torch.vtensor<[8,32],f32>, !torch.vtensor<[32],f32>, !torch.int -> !torch.vtensor<[8,32],f32>
    return %y, %add32, %mm32 : !torch.vtensor<[8,32],bf16>, !torch.vtensor<[8,32],f32>, !torch.vtensor<[8,32],f32>
  }
}

// -----

// A boolean mask as Hugging Face models pass it, [batch, 1, 1, keys] expanded to the scores' shape: the
// kernel reads the tensor before the expand (broadcasting through zero strides); the function's torch
// ops expand it again, as IREE's own attention needs it.
// CHECK-LABEL: func.func @padding_mask
// CHECK:         call @kiln_attention_0(%arg0, %arg1, %arg2, %arg3) : ({{.*}}, !torch.vtensor<[2,1,1,16],i1>) -> !torch.vtensor<[2,4,16,32],bf16>
// CHECK:       func.func private @kiln_attention_0
// CHECK-SAME:    mask = "bool", mask_shape = [2, 1, 1, 16]
// CHECK:         torch.aten.expand %arg3, {{.*}} -> !torch.vtensor<[2,4,16,16],i1>
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @padding_mask(%q: !torch.vtensor<[2,4,16,32],bf16>, %k: !torch.vtensor<[2,4,16,32],bf16>, %v: !torch.vtensor<[2,4,16,32],bf16>, %keep: !torch.vtensor<[2,1,1,16],i1>) -> !torch.vtensor<[2,4,16,32],bf16> {
    %int2 = torch.constant.int 2
    %int4 = torch.constant.int 4
    %int16 = torch.constant.int 16
    %false = torch.constant.bool false
    %none = torch.constant.none
    %float0 = torch.constant.float 0.000000e+00
    %sizes = torch.prim.ListConstruct %int2, %int4, %int16, %int16 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %mask = torch.aten.expand %keep, %sizes, %false : !torch.vtensor<[2,1,1,16],i1>, !torch.list<int>, !torch.bool -> !torch.vtensor<[2,4,16,16],i1>
    %a = torch.aten.scaled_dot_product_attention %q, %k, %v, %mask, %float0, %false, %none, %false : !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,32],bf16>, !torch.vtensor<[2,4,16,16],i1>, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[2,4,16,32],bf16>
    return %a : !torch.vtensor<[2,4,16,32],bf16>
  }
}

// -----

// A matmul of literals alone (inline weights, no input: SigLIP's pooling head projects its learned
// probe through its query weights) stays a torch op, for IREE to evaluate while compiling; a kernel
// there is CUDA code its constant evaluation cannot run (iree-compile 3.13 crashed on it). A product
// with an input is outlined.
// CHECK-LABEL: func.func @constant_product
// CHECK:         %[[C:.*]] = torch.aten.mm %{{.*}}, %{{.*}} : !torch.vtensor<[1,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[1,64],f32>
// CHECK:         %[[Y:.*]] = call @kiln_mm_0(%arg0, %{{.*}}) : (!torch.vtensor<[1,64],f32>, !torch.vtensor<[64,64],f32>) -> !torch.vtensor<[1,64],f32>
// CHECK:         return %[[C]], %[[Y]]
module attributes {kiln.matmul_precision = "high", kiln.conv_precision = "high"} {
  func.func @constant_product(%x: !torch.vtensor<[1,64],f32>) -> (!torch.vtensor<[1,64],f32>, !torch.vtensor<[1,64],f32>) {
    %probe = torch.vtensor.literal(dense<0.5> : tensor<1x64xf32>) : !torch.vtensor<[1,64],f32>
    %w = torch.vtensor.literal(dense<0.25> : tensor<64x64xf32>) : !torch.vtensor<[64,64],f32>
    %c = torch.aten.mm %probe, %w : !torch.vtensor<[1,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[1,64],f32>
    %y = torch.aten.mm %x, %w : !torch.vtensor<[1,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[1,64],f32>
    return %c, %y : !torch.vtensor<[1,64],f32>, !torch.vtensor<[1,64],f32>
  }
}

// -----

// SwiGLU as a decoder's MLP has it: the gate and up projections of one normed input (two views of it),
// each viewed back to [batch, seq, hidden], silu(gate) computed in f32 and rounded, times up. With 16
// rows neither matmul takes the SiLU or the product: outline-row-programs computes them in one pass.
// CHECK-LABEL: func.func @swiglu
// CHECK:         %[[G:.*]] = call @kiln_mm_0(%{{.*}}, %arg1) : (!torch.vtensor<[16,8],bf16>, !torch.vtensor<[24,8],bf16>) -> !torch.vtensor<[16,24],bf16>
// CHECK:         torch.aten.exp
// CHECK:         %[[U:.*]] = call @kiln_mm_0(%{{.*}}, %arg2)
// CHECK:         %[[Y:.*]] = torch.aten.mul.Tensor
// CHECK-NEXT:    return %[[Y]]
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    {b_layout = "nk", bias = false, dtype = "bf16", k = 8 : i64, kind = "mm", m = 16 : i64, n = 24 : i64, out_dtype = "bf16", precision = ""}
// CHECK-NOT:   func.func private @kiln_mm_1
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @swiglu(%x: !torch.vtensor<[2,8,8],bf16>, %wg: !torch.vtensor<[24,8],bf16>, %wu: !torch.vtensor<[24,8],bf16>) -> !torch.vtensor<[2,8,24],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int6 = torch.constant.int 6
    %int8 = torch.constant.int 8
    %int15 = torch.constant.int 15
    %int16 = torch.constant.int 16
    %int24 = torch.constant.int 24
    %float1 = torch.constant.float 1.000000e+00
    %false = torch.constant.bool false
    %none = torch.constant.none
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %flat = torch.prim.ListConstruct %int16, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
    %back = torch.prim.ListConstruct %int2, %int8, %int24 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %xg = torch.aten.view %x, %flat : !torch.vtensor<[2,8,8],bf16>, !torch.list<int> -> !torch.vtensor<[16,8],bf16>
    %wgt = torch.aten.permute %wg, %swap : !torch.vtensor<[24,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,24],bf16>
    %g = torch.aten.mm %xg, %wgt : !torch.vtensor<[16,8],bf16>, !torch.vtensor<[8,24],bf16> -> !torch.vtensor<[16,24],bf16>
    %gv = torch.aten.view %g, %back : !torch.vtensor<[16,24],bf16>, !torch.list<int> -> !torch.vtensor<[2,8,24],bf16>
    %g32 = torch.aten.to.dtype %gv, %int6, %false, %false, %none : !torch.vtensor<[2,8,24],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[2,8,24],f32>
    %n = torch.aten.neg %g32 : !torch.vtensor<[2,8,24],f32> -> !torch.vtensor<[2,8,24],f32>
    %e = torch.aten.exp %n : !torch.vtensor<[2,8,24],f32> -> !torch.vtensor<[2,8,24],f32>
    %d = torch.aten.add.Scalar %e, %float1, %int1 : !torch.vtensor<[2,8,24],f32>, !torch.float, !torch.int -> !torch.vtensor<[2,8,24],f32>
    %r = torch.aten.reciprocal %d : !torch.vtensor<[2,8,24],f32> -> !torch.vtensor<[2,8,24],f32>
    %s = torch.aten.mul.Tensor %g32, %r : !torch.vtensor<[2,8,24],f32>, !torch.vtensor<[2,8,24],f32> -> !torch.vtensor<[2,8,24],f32>
    %s16 = torch.aten.to.dtype %s, %int15, %false, %false, %none : !torch.vtensor<[2,8,24],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[2,8,24],bf16>
    %xu = torch.aten.view %x, %flat : !torch.vtensor<[2,8,8],bf16>, !torch.list<int> -> !torch.vtensor<[16,8],bf16>
    %wut = torch.aten.permute %wu, %swap : !torch.vtensor<[24,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,24],bf16>
    %u = torch.aten.mm %xu, %wut : !torch.vtensor<[16,8],bf16>, !torch.vtensor<[8,24],bf16> -> !torch.vtensor<[16,24],bf16>
    %uv = torch.aten.view %u, %back : !torch.vtensor<[16,24],bf16>, !torch.list<int> -> !torch.vtensor<[2,8,24],bf16>
    %y = torch.aten.mul.Tensor %s16, %uv : !torch.vtensor<[2,8,24],bf16>, !torch.vtensor<[2,8,24],bf16> -> !torch.vtensor<[2,8,24],bf16>
    return %y : !torch.vtensor<[2,8,24],bf16>
  }
}

// -----

// The same in a decode step (one row): one call takes both weights; the function's steps read v0 (gate)
// and v1 (up), both products computed by the GEMV.
// CHECK-LABEL: func.func @swiglu_decode
// CHECK:         %[[G:.*]] = call @kiln_mm_0(%{{.*}}, %arg1, %arg2) : (!torch.vtensor<[1,8],bf16>, !torch.vtensor<[24,8],bf16>, !torch.vtensor<[24,8],bf16>) -> !torch.vtensor<[1,24],bf16>
// CHECK:         %[[V:.*]] = torch.aten.view %[[G]], {{.*}} -> !torch.vtensor<[1,1,24],bf16>
// CHECK-NEXT:    return %[[V]]
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    gated = true
// CHECK-COUNT-2: torch.aten.mm
// CHECK:         torch.aten.exp
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @swiglu_decode(%x: !torch.vtensor<[1,1,8],bf16>, %wg: !torch.vtensor<[24,8],bf16>, %wu: !torch.vtensor<[24,8],bf16>) -> !torch.vtensor<[1,1,24],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int6 = torch.constant.int 6
    %int8 = torch.constant.int 8
    %int15 = torch.constant.int 15
    %int24 = torch.constant.int 24
    %float1 = torch.constant.float 1.000000e+00
    %false = torch.constant.bool false
    %none = torch.constant.none
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %flat = torch.prim.ListConstruct %int1, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
    %back = torch.prim.ListConstruct %int1, %int1, %int24 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %xg = torch.aten.view %x, %flat : !torch.vtensor<[1,1,8],bf16>, !torch.list<int> -> !torch.vtensor<[1,8],bf16>
    %wgt = torch.aten.permute %wg, %swap : !torch.vtensor<[24,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,24],bf16>
    %g = torch.aten.mm %xg, %wgt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,24],bf16> -> !torch.vtensor<[1,24],bf16>
    %gv = torch.aten.view %g, %back : !torch.vtensor<[1,24],bf16>, !torch.list<int> -> !torch.vtensor<[1,1,24],bf16>
    %g32 = torch.aten.to.dtype %gv, %int6, %false, %false, %none : !torch.vtensor<[1,1,24],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[1,1,24],f32>
    %n = torch.aten.neg %g32 : !torch.vtensor<[1,1,24],f32> -> !torch.vtensor<[1,1,24],f32>
    %e = torch.aten.exp %n : !torch.vtensor<[1,1,24],f32> -> !torch.vtensor<[1,1,24],f32>
    %d = torch.aten.add.Scalar %e, %float1, %int1 : !torch.vtensor<[1,1,24],f32>, !torch.float, !torch.int -> !torch.vtensor<[1,1,24],f32>
    %r = torch.aten.reciprocal %d : !torch.vtensor<[1,1,24],f32> -> !torch.vtensor<[1,1,24],f32>
    %s = torch.aten.mul.Tensor %g32, %r : !torch.vtensor<[1,1,24],f32>, !torch.vtensor<[1,1,24],f32> -> !torch.vtensor<[1,1,24],f32>
    %s16 = torch.aten.to.dtype %s, %int15, %false, %false, %none : !torch.vtensor<[1,1,24],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[1,1,24],bf16>
    %xu = torch.aten.view %x, %flat : !torch.vtensor<[1,1,8],bf16>, !torch.list<int> -> !torch.vtensor<[1,8],bf16>
    %wut = torch.aten.permute %wu, %swap : !torch.vtensor<[24,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,24],bf16>
    %u = torch.aten.mm %xu, %wut : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,24],bf16> -> !torch.vtensor<[1,24],bf16>
    %uv = torch.aten.view %u, %back : !torch.vtensor<[1,24],bf16>, !torch.list<int> -> !torch.vtensor<[1,1,24],bf16>
    %y = torch.aten.mul.Tensor %s16, %uv : !torch.vtensor<[1,1,24],bf16>, !torch.vtensor<[1,1,24],bf16> -> !torch.vtensor<[1,1,24],bf16>
    return %y : !torch.vtensor<[1,1,24],bf16>
  }
}

// -----

// The ops after a product that read something besides it and constants are not its epilogue: here the
// residual x is added (a row program's job, beside the norm that follows); a scale by a constant
// before it is.
// CHECK-LABEL: func.func @scaled_then_residual
// CHECK:         %[[Y:.*]] = call @kiln_mm_0(%arg0, %arg1) : (!torch.vtensor<[8,32],f32>, !torch.vtensor<[32,32],f32>) -> !torch.vtensor<[8,32],f32>
// CHECK-NEXT:    %[[R:.*]] = torch.aten.add.Tensor %[[Y]], %arg0
// CHECK-NEXT:    return %[[R]]
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    epilogue = {{\[\[}}"mul", "f32", 0, 5.000000e-01]]
// CHECK-SAME:    product_dtype = "f32"
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @scaled_then_residual(%x: !torch.vtensor<[8,32],f32>, %w: !torch.vtensor<[32,32],f32>) -> !torch.vtensor<[8,32],f32> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %half = torch.constant.float 5.000000e-01
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[32,32],f32>, !torch.list<int> -> !torch.vtensor<[32,32],f32>
    %mm = torch.aten.mm %x, %wt : !torch.vtensor<[8,32],f32>, !torch.vtensor<[32,32],f32> -> !torch.vtensor<[8,32],f32>
    %s = torch.aten.mul.Scalar %mm, %half : !torch.vtensor<[8,32],f32>, !torch.float -> !torch.vtensor<[8,32],f32>
    %y = torch.aten.add.Tensor %s, %x, %int1 : !torch.vtensor<[8,32],f32>, !torch.vtensor<[8,32],f32>, !torch.int -> !torch.vtensor<[8,32],f32>
    return %y : !torch.vtensor<[8,32],f32>
  }
}

// -----

// A decode step's Q, K and V projections of one input (views of it), each product read apart: one call
// of their weights stacked along N, whose three results take the products' uses.
// CHECK-LABEL: func.func @qkv_decode
// CHECK:         %[[P:.*]]:3 = call @kiln_mm_0(%{{.*}}, %arg1, %arg2, %arg3) : (!torch.vtensor<[1,8],bf16>, !torch.vtensor<[16,8],bf16>, !torch.vtensor<[8,8],bf16>, !torch.vtensor<[8,8],bf16>) -> (!torch.vtensor<[1,16],bf16>, !torch.vtensor<[1,8],bf16>, !torch.vtensor<[1,8],bf16>)
// CHECK-NOT:     torch.aten.mm
// CHECK:         return %[[P]]#0, %[[P]]#1, %[[P]]#2
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    n = 32
// CHECK-SAME:    stacked = [16, 8, 8]
// CHECK-COUNT-3: torch.aten.mm
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @qkv_decode(%x: !torch.vtensor<[1,1,8],bf16>, %wq: !torch.vtensor<[16,8],bf16>, %wk: !torch.vtensor<[8,8],bf16>, %wv: !torch.vtensor<[8,8],bf16>) -> (!torch.vtensor<[1,16],bf16>, !torch.vtensor<[1,8],bf16>, !torch.vtensor<[1,8],bf16>) {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int8 = torch.constant.int 8
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %flat = torch.prim.ListConstruct %int1, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
    %xq = torch.aten.view %x, %flat : !torch.vtensor<[1,1,8],bf16>, !torch.list<int> -> !torch.vtensor<[1,8],bf16>
    %wqt = torch.aten.permute %wq, %swap : !torch.vtensor<[16,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,16],bf16>
    %q = torch.aten.mm %xq, %wqt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,16],bf16> -> !torch.vtensor<[1,16],bf16>
    %xk = torch.aten.view %x, %flat : !torch.vtensor<[1,1,8],bf16>, !torch.list<int> -> !torch.vtensor<[1,8],bf16>
    %wkt = torch.aten.permute %wk, %swap : !torch.vtensor<[8,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,8],bf16>
    %k = torch.aten.mm %xk, %wkt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,8],bf16> -> !torch.vtensor<[1,8],bf16>
    %xv = torch.aten.view %x, %flat : !torch.vtensor<[1,1,8],bf16>, !torch.list<int> -> !torch.vtensor<[1,8],bf16>
    %wvt = torch.aten.permute %wv, %swap : !torch.vtensor<[8,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,8],bf16>
    %v = torch.aten.mm %xv, %wvt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,8],bf16> -> !torch.vtensor<[1,8],bf16>
    return %q, %k, %v : !torch.vtensor<[1,16],bf16>, !torch.vtensor<[1,8],bf16>, !torch.vtensor<[1,8],bf16>
  }
}

// -----

// Not stacked where a weight is made after the first product (here K's, scaled): the one call could
// not take it. Each projection keeps a call of its own.
// CHECK-LABEL: func.func @qkv_weight_made_later
// CHECK-COUNT-3: call @kiln_mm_
// CHECK-NOT:     stacked
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @qkv_weight_made_later(%x: !torch.vtensor<[1,8],bf16>, %wq: !torch.vtensor<[16,8],bf16>, %wk: !torch.vtensor<[8,8],bf16>, %wv: !torch.vtensor<[8,8],bf16>) -> (!torch.vtensor<[1,16],bf16>, !torch.vtensor<[1,8],bf16>, !torch.vtensor<[1,8],bf16>) {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wqt = torch.aten.permute %wq, %swap : !torch.vtensor<[16,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,16],bf16>
    %q = torch.aten.mm %x, %wqt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,16],bf16> -> !torch.vtensor<[1,16],bf16>
    %wk2 = torch.aten.add.Tensor %wk, %wk, %int1 : !torch.vtensor<[8,8],bf16>, !torch.vtensor<[8,8],bf16>, !torch.int -> !torch.vtensor<[8,8],bf16>
    %wkt = torch.aten.permute %wk2, %swap : !torch.vtensor<[8,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,8],bf16>
    %k = torch.aten.mm %x, %wkt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,8],bf16> -> !torch.vtensor<[1,8],bf16>
    %wvt = torch.aten.permute %wv, %swap : !torch.vtensor<[8,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,8],bf16>
    %v = torch.aten.mm %x, %wvt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,8],bf16> -> !torch.vtensor<[1,8],bf16>
    return %q, %k, %v : !torch.vtensor<[1,16],bf16>, !torch.vtensor<[1,8],bf16>, !torch.vtensor<[1,8],bf16>
  }
}

// -----

// A checkpoint's weights are loaded where each is used, after the first projection (at the torch
// hand-off: ml_program.global_load_const and torch_c.from_builtin_tensor; literals here): the ops that
// only read a constant move before the one call.
// CHECK-LABEL: func.func @qkv_weights_loaded_later
// CHECK:         torch.vtensor.literal(dense<1.000000e+00>
// CHECK:         torch.vtensor.literal(dense<2.000000e+00>
// CHECK:         %[[P:.*]]:3 = call @kiln_mm_0(%arg0, %arg1, %{{.*}}, %{{.*}})
// CHECK-NOT:     torch.aten.mm
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    stacked = [16, 8, 8]
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @qkv_weights_loaded_later(%x: !torch.vtensor<[1,8],bf16>, %wq: !torch.vtensor<[16,8],bf16>) -> (!torch.vtensor<[1,16],bf16>, !torch.vtensor<[1,8],bf16>, !torch.vtensor<[1,8],bf16>) {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wqt = torch.aten.permute %wq, %swap : !torch.vtensor<[16,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,16],bf16>
    %q = torch.aten.mm %x, %wqt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,16],bf16> -> !torch.vtensor<[1,16],bf16>
    %wk = torch.vtensor.literal(dense<1.0> : tensor<8x8xbf16>) : !torch.vtensor<[8,8],bf16>
    %wkt = torch.aten.permute %wk, %swap : !torch.vtensor<[8,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,8],bf16>
    %k = torch.aten.mm %x, %wkt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,8],bf16> -> !torch.vtensor<[1,8],bf16>
    %wv = torch.vtensor.literal(dense<2.0> : tensor<8x8xbf16>) : !torch.vtensor<[8,8],bf16>
    %wvt = torch.aten.permute %wv, %swap : !torch.vtensor<[8,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,8],bf16>
    %v = torch.aten.mm %x, %wvt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,8],bf16> -> !torch.vtensor<[1,8],bf16>
    return %q, %k, %v : !torch.vtensor<[1,16],bf16>, !torch.vtensor<[1,8],bf16>, !torch.vtensor<[1,8],bf16>
  }
}

// -----

// A decode step's matmul over an int8 weight as --quantize makes it (QuantizedLinear: values times a
// per-channel scale, in f32, rounded to bf16): the call takes the values and the scales, and the
// dequantized weight is no longer made in the caller.
// CHECK-LABEL: func.func @int8_decode
// CHECK:         call @kiln_mm_0(%arg0, %arg1, %arg2) : (!torch.vtensor<[1,8],bf16>, !torch.vtensor<[16,8],si8>, !torch.vtensor<[16,1],f32>) -> !torch.vtensor<[1,16],bf16>
// CHECK-NOT:     torch.aten.mul.Tensor
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    quantized = [8, 0]
// CHECK:         torch.aten.mul.Tensor
// CHECK:         torch.aten.mm
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @int8_decode(%x: !torch.vtensor<[1,8],bf16>, %q: !torch.vtensor<[16,8],si8>, %s: !torch.vtensor<[16,1],f32>) -> !torch.vtensor<[1,16],bf16> {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int6 = torch.constant.int 6
    %int15 = torch.constant.int 15
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %wide = torch.aten.to.dtype %q, %int6, %false, %false, %none : !torch.vtensor<[16,8],si8>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[16,8],f32>
    %scaled = torch.aten.mul.Tensor %wide, %s : !torch.vtensor<[16,8],f32>, !torch.vtensor<[16,1],f32> -> !torch.vtensor<[16,8],f32>
    %w = torch.aten.to.dtype %scaled, %int15, %false, %false, %none : !torch.vtensor<[16,8],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[16,8],bf16>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[16,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,16],bf16>
    %y = torch.aten.mm %x, %wt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,16],bf16> -> !torch.vtensor<[1,16],bf16>
    return %y : !torch.vtensor<[1,16],bf16>
  }
}

// -----

// int4 in halves with a scale per group of 4 inputs: the nibbles unpacked by a mask, a shift and a
// concatenation, minus 8, scaled per group. The call takes the packed bytes [16, 4] and the scales [16, 2].
// CHECK-LABEL: func.func @int4_decode
// CHECK:         call @kiln_mm_0(%arg0, %arg1, %arg2) : (!torch.vtensor<[1,8],bf16>, !torch.vtensor<[16,4],si8>, !torch.vtensor<[16,2],f32>) -> !torch.vtensor<[1,16],bf16>
// CHECK-NOT:     torch.aten.cat
// CHECK:       func.func private @kiln_mm_0
// CHECK-SAME:    quantized = [4, 4]
// CHECK:         torch.aten.cat
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @int4_decode(%x: !torch.vtensor<[1,8],bf16>, %p: !torch.vtensor<[16,4],si8>, %s: !torch.vtensor<[16,2],f32>) -> !torch.vtensor<[1,16],bf16> {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int4 = torch.constant.int 4
    %int6 = torch.constant.int 6
    %int8 = torch.constant.int 8
    %int15 = torch.constant.int 15
    %int16 = torch.constant.int 16
    %intm1 = torch.constant.int -1
    %mask = torch.vtensor.literal(dense<15> : tensor<si8>) : !torch.vtensor<[],si8>
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %low = torch.aten.bitwise_and.Tensor %p, %mask : !torch.vtensor<[16,4],si8>, !torch.vtensor<[],si8> -> !torch.vtensor<[16,4],si8>
    %shifted = torch.aten.__rshift__.Scalar %p, %int4 : !torch.vtensor<[16,4],si8>, !torch.int -> !torch.vtensor<[16,4],si8>
    %high = torch.aten.bitwise_and.Tensor %shifted, %mask : !torch.vtensor<[16,4],si8>, !torch.vtensor<[],si8> -> !torch.vtensor<[16,4],si8>
    %parts = torch.prim.ListConstruct %low, %high : (!torch.vtensor<[16,4],si8>, !torch.vtensor<[16,4],si8>) -> !torch.list<vtensor>
    %nibbles = torch.aten.cat %parts, %int1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[16,8],si8>
    %wide = torch.aten.to.dtype %nibbles, %int6, %false, %false, %none : !torch.vtensor<[16,8],si8>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[16,8],f32>
    %centered = torch.aten.sub.Scalar %wide, %int8, %int1 : !torch.vtensor<[16,8],f32>, !torch.int, !torch.int -> !torch.vtensor<[16,8],f32>
    %split_shape = torch.prim.ListConstruct %int16, %int2, %int4 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %split = torch.aten.view %centered, %split_shape : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[16,2,4],f32>
    %s3 = torch.aten.unsqueeze %s, %intm1 : !torch.vtensor<[16,2],f32>, !torch.int -> !torch.vtensor<[16,2,1],f32>
    %scaled = torch.aten.mul.Tensor %split, %s3 : !torch.vtensor<[16,2,4],f32>, !torch.vtensor<[16,2,1],f32> -> !torch.vtensor<[16,2,4],f32>
    %flat_shape = torch.prim.ListConstruct %int16, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
    %flat = torch.aten.view %scaled, %flat_shape : !torch.vtensor<[16,2,4],f32>, !torch.list<int> -> !torch.vtensor<[16,8],f32>
    %w = torch.aten.to.dtype %flat, %int15, %false, %false, %none : !torch.vtensor<[16,8],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[16,8],bf16>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[16,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,16],bf16>
    %y = torch.aten.mm %x, %wt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,16],bf16> -> !torch.vtensor<[1,16],bf16>
    return %y : !torch.vtensor<[1,16],bf16>
  }
}

// -----

// Not the form: the nibbles offset by 7, not 8. The GEMV takes the dequantized weight, as any other.
// CHECK-LABEL: func.func @int4_other_offset
// CHECK:         torch.aten.cat
// CHECK:         call @kiln_mm_0(%arg0, %{{.*}}) : (!torch.vtensor<[1,8],bf16>, !torch.vtensor<[16,8],bf16>)
// CHECK-NOT:     quantized
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @int4_other_offset(%x: !torch.vtensor<[1,8],bf16>, %p: !torch.vtensor<[16,4],si8>, %s: !torch.vtensor<[16,2],f32>) -> !torch.vtensor<[1,16],bf16> {
    %none = torch.constant.none
    %false = torch.constant.bool false
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int4 = torch.constant.int 4
    %int6 = torch.constant.int 6
    %int7 = torch.constant.int 7
    %int8 = torch.constant.int 8
    %int15 = torch.constant.int 15
    %int16 = torch.constant.int 16
    %intm1 = torch.constant.int -1
    %mask = torch.vtensor.literal(dense<15> : tensor<si8>) : !torch.vtensor<[],si8>
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %low = torch.aten.bitwise_and.Tensor %p, %mask : !torch.vtensor<[16,4],si8>, !torch.vtensor<[],si8> -> !torch.vtensor<[16,4],si8>
    %shifted = torch.aten.__rshift__.Scalar %p, %int4 : !torch.vtensor<[16,4],si8>, !torch.int -> !torch.vtensor<[16,4],si8>
    %high = torch.aten.bitwise_and.Tensor %shifted, %mask : !torch.vtensor<[16,4],si8>, !torch.vtensor<[],si8> -> !torch.vtensor<[16,4],si8>
    %parts = torch.prim.ListConstruct %low, %high : (!torch.vtensor<[16,4],si8>, !torch.vtensor<[16,4],si8>) -> !torch.list<vtensor>
    %nibbles = torch.aten.cat %parts, %int1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[16,8],si8>
    %wide = torch.aten.to.dtype %nibbles, %int6, %false, %false, %none : !torch.vtensor<[16,8],si8>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[16,8],f32>
    %centered = torch.aten.sub.Scalar %wide, %int7, %int1 : !torch.vtensor<[16,8],f32>, !torch.int, !torch.int -> !torch.vtensor<[16,8],f32>
    %split_shape = torch.prim.ListConstruct %int16, %int2, %int4 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %split = torch.aten.view %centered, %split_shape : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[16,2,4],f32>
    %s3 = torch.aten.unsqueeze %s, %intm1 : !torch.vtensor<[16,2],f32>, !torch.int -> !torch.vtensor<[16,2,1],f32>
    %scaled = torch.aten.mul.Tensor %split, %s3 : !torch.vtensor<[16,2,4],f32>, !torch.vtensor<[16,2,1],f32> -> !torch.vtensor<[16,2,4],f32>
    %flat_shape = torch.prim.ListConstruct %int16, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
    %flat = torch.aten.view %scaled, %flat_shape : !torch.vtensor<[16,2,4],f32>, !torch.list<int> -> !torch.vtensor<[16,8],f32>
    %w = torch.aten.to.dtype %flat, %int15, %false, %false, %none : !torch.vtensor<[16,8],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[16,8],bf16>
    %wt = torch.aten.permute %w, %swap : !torch.vtensor<[16,8],bf16>, !torch.list<int> -> !torch.vtensor<[8,16],bf16>
    %y = torch.aten.mm %x, %wt : !torch.vtensor<[1,8],bf16>, !torch.vtensor<[8,16],bf16> -> !torch.vtensor<[1,16],bf16>
    return %y : !torch.vtensor<[1,16],bf16>
  }
}

// -----

// An epilogue ends before a widening: here the next Linear's upcast of its A (a bf16 model's matmul in
// kiln's prims). The first kernel stores bf16, and the second is a bf16 matmul too.
// CHECK-LABEL: func.func @widened_for_the_next
// CHECK:         %[[H:.*]] = call @kiln_mm_0(%arg0, %arg1) : (!torch.vtensor<[8,32],bf16>, !torch.vtensor<[32,32],bf16>) -> !torch.vtensor<[8,32],bf16>
// CHECK-NEXT:    %[[Y:.*]] = call @kiln_mm_1(%[[H]], %arg2) : (!torch.vtensor<[8,32],bf16>, !torch.vtensor<[32,32],bf16>) -> !torch.vtensor<[8,32],f32>
// CHECK-NEXT:    return %[[Y]]
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @widened_for_the_next(%x: !torch.vtensor<[8,32],bf16>, %w1: !torch.vtensor<[32,32],bf16>, %w2: !torch.vtensor<[32,32],bf16>) -> !torch.vtensor<[8,32],f32> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int6 = torch.constant.int 6
    %int15 = torch.constant.int 15
    %half = torch.constant.float 5.000000e-01
    %false = torch.constant.bool false
    %none = torch.constant.none
    %swap = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
    %x32 = torch.aten.to.dtype %x, %int6, %false, %false, %none : !torch.vtensor<[8,32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[8,32],f32>
    %w1t = torch.aten.permute %w1, %swap : !torch.vtensor<[32,32],bf16>, !torch.list<int> -> !torch.vtensor<[32,32],bf16>
    %w1t32 = torch.aten.to.dtype %w1t, %int6, %false, %false, %none : !torch.vtensor<[32,32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[32,32],f32>
    %mm1 = torch.aten.mm %x32, %w1t32 : !torch.vtensor<[8,32],f32>, !torch.vtensor<[32,32],f32> -> !torch.vtensor<[8,32],f32>
    %s = torch.aten.mul.Scalar %mm1, %half : !torch.vtensor<[8,32],f32>, !torch.float -> !torch.vtensor<[8,32],f32>
    %s16 = torch.aten.to.dtype %s, %int15, %false, %false, %none : !torch.vtensor<[8,32],f32>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[8,32],bf16>
    %s32 = torch.aten.to.dtype %s16, %int6, %false, %false, %none : !torch.vtensor<[8,32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[8,32],f32>
    %w2t = torch.aten.permute %w2, %swap : !torch.vtensor<[32,32],bf16>, !torch.list<int> -> !torch.vtensor<[32,32],bf16>
    %w2t32 = torch.aten.to.dtype %w2t, %int6, %false, %false, %none : !torch.vtensor<[32,32],bf16>, !torch.int, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[32,32],f32>
    %mm2 = torch.aten.mm %s32, %w2t32 : !torch.vtensor<[8,32],f32>, !torch.vtensor<[32,32],f32> -> !torch.vtensor<[8,32],f32>
    return %mm2 : !torch.vtensor<[8,32],f32>
  }
}
