// RUN: kiln opt %s --pass outline-cache-writes --split-input-file | filecheck %s

// A decode step's write of its one token's keys into the cache (compiler/generation.py `_written`): a
// call of a cache_write function taking the position tensor, the new keys and the cache, whose body is
// the same select (IREE's code, should no kernel replace it); the index arithmetic is gone from the caller.
// CHECK-LABEL: func.func @decode_write
// CHECK:         %[[W:.*]] = call @kiln_cache_write_0(%arg0, %arg1, %arg2) : (!torch.vtensor<[1],si64>, !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>) -> !torch.vtensor<[1,2,64,16],bf16>
// CHECK-NOT:     torch.aten.sub.Tensor
// CHECK:         return %[[W]]
// CHECK:       func.func private @kiln_cache_write_0
// CHECK-SAME:    kind = "cache_write"
// CHECK-SAME:    positions = 1
// CHECK-SAME:    seq = 64
// CHECK-SAME:    tokens = 1
// CHECK:         torch.aten.index_select
// CHECK:         torch.aten.where.self
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @decode_write(%pos: !torch.vtensor<[1],si64>, %new: !torch.vtensor<[1,2,1,16],bf16>, %cache: !torch.vtensor<[1,2,64,16],bf16>) -> !torch.vtensor<[1,2,64,16],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int64 = torch.constant.int 64
    %none = torch.constant.none
    %false = torch.constant.bool false
    %cpu = torch.constant.device "cpu"
    %arange = torch.aten.arange.start_step %int0, %int64, %int1, %none, %int0, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[64],si64>
    %first = torch.aten.squeeze.dim %pos, %int0 : !torch.vtensor<[1],si64>, !torch.int -> !torch.vtensor<[],si64>
    %offsets = torch.aten.sub.Tensor %arange, %first, %int1 : !torch.vtensor<[64],si64>, !torch.vtensor<[],si64>, !torch.int -> !torch.vtensor<[64],si64>
    %low = torch.aten.ge.Scalar %offsets, %int0 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %high = torch.aten.lt.Scalar %offsets, %int1 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %inside = torch.aten.bitwise_and.Tensor %low, %high : !torch.vtensor<[64],i1>, !torch.vtensor<[64],i1> -> !torch.vtensor<[64],i1>
    %slots = torch.aten.clamp %offsets, %int0, %int0 : !torch.vtensor<[64],si64>, !torch.int, !torch.int -> !torch.vtensor<[64],si64>
    %spread = torch.aten.index_select %new, %int2, %slots : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.vtensor<[64],si64> -> !torch.vtensor<[1,2,64,16],bf16>
    %rows = torch.aten.unsqueeze %inside, %int1 : !torch.vtensor<[64],i1>, !torch.int -> !torch.vtensor<[64,1],i1>
    %written = torch.aten.where.self %rows, %spread, %cache : !torch.vtensor<[64,1],i1>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16> -> !torch.vtensor<[1,2,64,16],bf16>
    return %written : !torch.vtensor<[1,2,64,16],bf16>
  }
}

// -----

// A prefill chunk of 4 tokens at positions start + arange(4): the position tensor's first element
// (select) is where the chunk starts.
// CHECK-LABEL: func.func @chunk_write
// CHECK:         call @kiln_cache_write_0(%arg0, %arg1, %arg2)
// CHECK:       func.func private @kiln_cache_write_0
// CHECK-SAME:    positions = 4
// CHECK-SAME:    tokens = 4
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @chunk_write(%positions: !torch.vtensor<[4],si64>, %new: !torch.vtensor<[1,2,4,16],f32>, %cache: !torch.vtensor<[1,2,64,16],f32>) -> !torch.vtensor<[1,2,64,16],f32> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int3 = torch.constant.int 3
    %int4 = torch.constant.int 4
    %int64 = torch.constant.int 64
    %none = torch.constant.none
    %false = torch.constant.bool false
    %cpu = torch.constant.device "cpu"
    %arange = torch.aten.arange.start_step %int0, %int64, %int1, %none, %int0, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[64],si64>
    %first = torch.aten.select.int %positions, %int0, %int0 : !torch.vtensor<[4],si64>, !torch.int, !torch.int -> !torch.vtensor<[],si64>
    %offsets = torch.aten.sub.Tensor %arange, %first, %int1 : !torch.vtensor<[64],si64>, !torch.vtensor<[],si64>, !torch.int -> !torch.vtensor<[64],si64>
    %low = torch.aten.ge.Scalar %offsets, %int0 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %high = torch.aten.lt.Scalar %offsets, %int4 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %inside = torch.aten.bitwise_and.Tensor %low, %high : !torch.vtensor<[64],i1>, !torch.vtensor<[64],i1> -> !torch.vtensor<[64],i1>
    %slots = torch.aten.clamp %offsets, %int0, %int3 : !torch.vtensor<[64],si64>, !torch.int, !torch.int -> !torch.vtensor<[64],si64>
    %spread = torch.aten.index_select %new, %int2, %slots : !torch.vtensor<[1,2,4,16],f32>, !torch.int, !torch.vtensor<[64],si64> -> !torch.vtensor<[1,2,64,16],f32>
    %rows = torch.aten.unsqueeze %inside, %int1 : !torch.vtensor<[64],i1>, !torch.int -> !torch.vtensor<[64,1],i1>
    %written = torch.aten.where.self %rows, %spread, %cache : !torch.vtensor<[64,1],i1>, !torch.vtensor<[1,2,64,16],f32>, !torch.vtensor<[1,2,64,16],f32> -> !torch.vtensor<[1,2,64,16],f32>
    return %written : !torch.vtensor<[1,2,64,16],f32>
  }
}

// -----

// Not a cache write: the slot test (offsets < 2) does not match the new tokens (1): left as it is.
// CHECK-LABEL: func.func @other_select
// CHECK-NOT:     call @kiln_cache_write
// CHECK:         torch.aten.where.self
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @other_select(%pos: !torch.vtensor<[1],si64>, %new: !torch.vtensor<[1,2,1,16],bf16>, %cache: !torch.vtensor<[1,2,64,16],bf16>) -> !torch.vtensor<[1,2,64,16],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int64 = torch.constant.int 64
    %none = torch.constant.none
    %false = torch.constant.bool false
    %cpu = torch.constant.device "cpu"
    %arange = torch.aten.arange.start_step %int0, %int64, %int1, %none, %int0, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[64],si64>
    %first = torch.aten.squeeze.dim %pos, %int0 : !torch.vtensor<[1],si64>, !torch.int -> !torch.vtensor<[],si64>
    %offsets = torch.aten.sub.Tensor %arange, %first, %int1 : !torch.vtensor<[64],si64>, !torch.vtensor<[],si64>, !torch.int -> !torch.vtensor<[64],si64>
    %low = torch.aten.ge.Scalar %offsets, %int0 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %high = torch.aten.lt.Scalar %offsets, %int2 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %inside = torch.aten.bitwise_and.Tensor %low, %high : !torch.vtensor<[64],i1>, !torch.vtensor<[64],i1> -> !torch.vtensor<[64],i1>
    %slots = torch.aten.clamp %offsets, %int0, %int0 : !torch.vtensor<[64],si64>, !torch.int, !torch.int -> !torch.vtensor<[64],si64>
    %spread = torch.aten.index_select %new, %int2, %slots : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.vtensor<[64],si64> -> !torch.vtensor<[1,2,64,16],bf16>
    %rows = torch.aten.unsqueeze %inside, %int1 : !torch.vtensor<[64],i1>, !torch.int -> !torch.vtensor<[64,1],i1>
    %written = torch.aten.where.self %rows, %spread, %cache : !torch.vtensor<[64,1],i1>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16> -> !torch.vtensor<[1,2,64,16],bf16>
    return %written : !torch.vtensor<[1,2,64,16],bf16>
  }
}

// -----

// A decode step's layer: queries and keys rotated (transformers' x * cos + rotate_half(x) * sin),
// keys and values written, all three read by the attention (its queries as GQA's rows of a group): one
// call of a rotary_cache_write function returning the rotated queries and both caches.
// CHECK-LABEL: func.func @decode_layer
// CHECK:         %[[R:.*]]:3 = call @kiln_rotary_cache_write_0(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7)
// CHECK-NOT:     torch.aten.cat
// CHECK-NOT:     torch.aten.where.self
// CHECK:         %[[Q:.*]] = torch.aten.view %[[R]]#0
// CHECK:         torch.aten.scaled_dot_product_attention %[[Q]], %[[R]]#1, %[[R]]#2
// CHECK:       func.func private @kiln_rotary_cache_write_0
// CHECK-SAME:    cos_batch = 1
// CHECK-SAME:    kind = "rotary_cache_write"
// CHECK-SAME:    kv_heads = 2
// CHECK-SAME:    q_heads = 4
// CHECK:         torch.aten.cat
// CHECK:         torch.aten.where.self
// CHECK:         torch.aten.where.self
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @decode_layer(%pos: !torch.vtensor<[1],si64>, %q: !torch.vtensor<[1,4,1,16],bf16>, %k: !torch.vtensor<[1,2,1,16],bf16>, %v: !torch.vtensor<[1,2,1,16],bf16>, %cos: !torch.vtensor<[1,1,1,16],bf16>, %sin: !torch.vtensor<[1,1,1,16],bf16>, %kc: !torch.vtensor<[1,2,64,16],bf16>, %vc: !torch.vtensor<[1,2,64,16],bf16>, %mask: !torch.vtensor<[1,1,1,64],bf16>) -> (!torch.vtensor<[1,2,2,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>) {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int3 = torch.constant.int 3
    %int8 = torch.constant.int 8
    %int16 = torch.constant.int 16
    %int64 = torch.constant.int 64
    %intmax = torch.constant.int 9223372036854775807
    %intm1 = torch.constant.int -1
    %none = torch.constant.none
    %false = torch.constant.bool false
    %float0 = torch.constant.float 0.000000e+00
    %scale = torch.constant.float 2.500000e-01
    %cpu = torch.constant.device "cpu"
    %q1 = torch.aten.mul.Tensor %q, %cos : !torch.vtensor<[1,4,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,4,1,16],bf16>
    %qlo = torch.aten.slice.Tensor %q, %int3, %int0, %int8, %int1 : !torch.vtensor<[1,4,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,4,1,8],bf16>
    %qhi = torch.aten.slice.Tensor %q, %int3, %int8, %intmax, %int1 : !torch.vtensor<[1,4,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,4,1,8],bf16>
    %qneg = torch.aten.neg %qhi : !torch.vtensor<[1,4,1,8],bf16> -> !torch.vtensor<[1,4,1,8],bf16>
    %qparts = torch.prim.ListConstruct %qneg, %qlo : (!torch.vtensor<[1,4,1,8],bf16>, !torch.vtensor<[1,4,1,8],bf16>) -> !torch.list<vtensor>
    %qcat = torch.aten.cat %qparts, %intm1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,4,1,16],bf16>
    %q2 = torch.aten.mul.Tensor %qcat, %sin : !torch.vtensor<[1,4,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,4,1,16],bf16>
    %qr = torch.aten.add.Tensor %q1, %q2, %int1 : !torch.vtensor<[1,4,1,16],bf16>, !torch.vtensor<[1,4,1,16],bf16>, !torch.int -> !torch.vtensor<[1,4,1,16],bf16>
    %k1 = torch.aten.mul.Tensor %k, %cos : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,2,1,16],bf16>
    %klo = torch.aten.slice.Tensor %k, %int3, %int0, %int8, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,1,8],bf16>
    %khi = torch.aten.slice.Tensor %k, %int3, %int8, %intmax, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,1,8],bf16>
    %kneg = torch.aten.neg %khi : !torch.vtensor<[1,2,1,8],bf16> -> !torch.vtensor<[1,2,1,8],bf16>
    %kparts = torch.prim.ListConstruct %kneg, %klo : (!torch.vtensor<[1,2,1,8],bf16>, !torch.vtensor<[1,2,1,8],bf16>) -> !torch.list<vtensor>
    %kcat = torch.aten.cat %kparts, %intm1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,1,16],bf16>
    %k2 = torch.aten.mul.Tensor %kcat, %sin : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,2,1,16],bf16>
    %kr = torch.aten.add.Tensor %k1, %k2, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,2,1,16],bf16>, !torch.int -> !torch.vtensor<[1,2,1,16],bf16>
    %arange = torch.aten.arange.start_step %int0, %int64, %int1, %none, %int0, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[64],si64>
    %first = torch.aten.squeeze.dim %pos, %int0 : !torch.vtensor<[1],si64>, !torch.int -> !torch.vtensor<[],si64>
    %offsets = torch.aten.sub.Tensor %arange, %first, %int1 : !torch.vtensor<[64],si64>, !torch.vtensor<[],si64>, !torch.int -> !torch.vtensor<[64],si64>
    %low = torch.aten.ge.Scalar %offsets, %int0 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %high = torch.aten.lt.Scalar %offsets, %int1 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %inside = torch.aten.bitwise_and.Tensor %low, %high : !torch.vtensor<[64],i1>, !torch.vtensor<[64],i1> -> !torch.vtensor<[64],i1>
    %slots = torch.aten.clamp %offsets, %int0, %int0 : !torch.vtensor<[64],si64>, !torch.int, !torch.int -> !torch.vtensor<[64],si64>
    %rows = torch.aten.unsqueeze %inside, %int1 : !torch.vtensor<[64],i1>, !torch.int -> !torch.vtensor<[64,1],i1>
    %kspread = torch.aten.index_select %kr, %int2, %slots : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.vtensor<[64],si64> -> !torch.vtensor<[1,2,64,16],bf16>
    %kw = torch.aten.where.self %rows, %kspread, %kc : !torch.vtensor<[64,1],i1>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16> -> !torch.vtensor<[1,2,64,16],bf16>
    %vspread = torch.aten.index_select %v, %int2, %slots : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.vtensor<[64],si64> -> !torch.vtensor<[1,2,64,16],bf16>
    %vw = torch.aten.where.self %rows, %vspread, %vc : !torch.vtensor<[64,1],i1>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16> -> !torch.vtensor<[1,2,64,16],bf16>
    %shape = torch.prim.ListConstruct %int1, %int2, %int2, %int16 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %grouped = torch.aten.view %qr, %shape : !torch.vtensor<[1,4,1,16],bf16>, !torch.list<int> -> !torch.vtensor<[1,2,2,16],bf16>
    %out = torch.aten.scaled_dot_product_attention %grouped, %kw, %vw, %mask, %float0, %false, %scale, %false : !torch.vtensor<[1,2,2,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,1,1,64],bf16>, !torch.float, !torch.bool, !torch.float, !torch.bool -> !torch.vtensor<[1,2,2,16],bf16>
    return %out, %kw, %vw : !torch.vtensor<[1,2,2,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>
  }
}

// -----

// The same layer whose keys are rotated with other angles than its queries: not one rotation, so only
// the writes are outlined, each alone.
// CHECK-LABEL: func.func @other_angles
// CHECK-NOT:     kiln_rotary_cache_write
// CHECK-COUNT-2: call @kiln_cache_write_0
module attributes {kiln.matmul_precision = "highest", kiln.conv_precision = "high"} {
  func.func @other_angles(%pos: !torch.vtensor<[1],si64>, %q: !torch.vtensor<[1,2,1,16],bf16>, %k: !torch.vtensor<[1,2,1,16],bf16>, %v: !torch.vtensor<[1,2,1,16],bf16>, %cos: !torch.vtensor<[1,1,1,16],bf16>, %sin: !torch.vtensor<[1,1,1,16],bf16>, %kc: !torch.vtensor<[1,2,64,16],bf16>, %vc: !torch.vtensor<[1,2,64,16],bf16>, %mask: !torch.vtensor<[1,1,1,64],bf16>) -> !torch.vtensor<[1,2,1,16],bf16> {
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %int2 = torch.constant.int 2
    %int3 = torch.constant.int 3
    %int8 = torch.constant.int 8
    %int64 = torch.constant.int 64
    %intmax = torch.constant.int 9223372036854775807
    %intm1 = torch.constant.int -1
    %none = torch.constant.none
    %false = torch.constant.bool false
    %float0 = torch.constant.float 0.000000e+00
    %scale = torch.constant.float 2.500000e-01
    %cpu = torch.constant.device "cpu"
    %q1 = torch.aten.mul.Tensor %q, %cos : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,2,1,16],bf16>
    %qlo = torch.aten.slice.Tensor %q, %int3, %int0, %int8, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,1,8],bf16>
    %qhi = torch.aten.slice.Tensor %q, %int3, %int8, %intmax, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,1,8],bf16>
    %qneg = torch.aten.neg %qhi : !torch.vtensor<[1,2,1,8],bf16> -> !torch.vtensor<[1,2,1,8],bf16>
    %qparts = torch.prim.ListConstruct %qneg, %qlo : (!torch.vtensor<[1,2,1,8],bf16>, !torch.vtensor<[1,2,1,8],bf16>) -> !torch.list<vtensor>
    %qcat = torch.aten.cat %qparts, %intm1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,1,16],bf16>
    %q2 = torch.aten.mul.Tensor %qcat, %sin : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,2,1,16],bf16>
    %qr = torch.aten.add.Tensor %q1, %q2, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,2,1,16],bf16>, !torch.int -> !torch.vtensor<[1,2,1,16],bf16>
    %k1 = torch.aten.mul.Tensor %k, %sin : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,2,1,16],bf16>
    %klo = torch.aten.slice.Tensor %k, %int3, %int0, %int8, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,1,8],bf16>
    %khi = torch.aten.slice.Tensor %k, %int3, %int8, %intmax, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[1,2,1,8],bf16>
    %kneg = torch.aten.neg %khi : !torch.vtensor<[1,2,1,8],bf16> -> !torch.vtensor<[1,2,1,8],bf16>
    %kparts = torch.prim.ListConstruct %kneg, %klo : (!torch.vtensor<[1,2,1,8],bf16>, !torch.vtensor<[1,2,1,8],bf16>) -> !torch.list<vtensor>
    %kcat = torch.aten.cat %kparts, %intm1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,2,1,16],bf16>
    %k2 = torch.aten.mul.Tensor %kcat, %cos : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,1,1,16],bf16> -> !torch.vtensor<[1,2,1,16],bf16>
    %kr = torch.aten.add.Tensor %k1, %k2, %int1 : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,2,1,16],bf16>, !torch.int -> !torch.vtensor<[1,2,1,16],bf16>
    %arange = torch.aten.arange.start_step %int0, %int64, %int1, %none, %int0, %cpu, %false : !torch.int, !torch.int, !torch.int, !torch.none, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[64],si64>
    %first = torch.aten.squeeze.dim %pos, %int0 : !torch.vtensor<[1],si64>, !torch.int -> !torch.vtensor<[],si64>
    %offsets = torch.aten.sub.Tensor %arange, %first, %int1 : !torch.vtensor<[64],si64>, !torch.vtensor<[],si64>, !torch.int -> !torch.vtensor<[64],si64>
    %low = torch.aten.ge.Scalar %offsets, %int0 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %high = torch.aten.lt.Scalar %offsets, %int1 : !torch.vtensor<[64],si64>, !torch.int -> !torch.vtensor<[64],i1>
    %inside = torch.aten.bitwise_and.Tensor %low, %high : !torch.vtensor<[64],i1>, !torch.vtensor<[64],i1> -> !torch.vtensor<[64],i1>
    %slots = torch.aten.clamp %offsets, %int0, %int0 : !torch.vtensor<[64],si64>, !torch.int, !torch.int -> !torch.vtensor<[64],si64>
    %rows = torch.aten.unsqueeze %inside, %int1 : !torch.vtensor<[64],i1>, !torch.int -> !torch.vtensor<[64,1],i1>
    %kspread = torch.aten.index_select %kr, %int2, %slots : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.vtensor<[64],si64> -> !torch.vtensor<[1,2,64,16],bf16>
    %kw = torch.aten.where.self %rows, %kspread, %kc : !torch.vtensor<[64,1],i1>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16> -> !torch.vtensor<[1,2,64,16],bf16>
    %vspread = torch.aten.index_select %v, %int2, %slots : !torch.vtensor<[1,2,1,16],bf16>, !torch.int, !torch.vtensor<[64],si64> -> !torch.vtensor<[1,2,64,16],bf16>
    %vw = torch.aten.where.self %rows, %vspread, %vc : !torch.vtensor<[64,1],i1>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16> -> !torch.vtensor<[1,2,64,16],bf16>
    %out = torch.aten.scaled_dot_product_attention %qr, %kw, %vw, %mask, %float0, %false, %scale, %false : !torch.vtensor<[1,2,1,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,2,64,16],bf16>, !torch.vtensor<[1,1,1,64],bf16>, !torch.float, !torch.bool, !torch.float, !torch.bool -> !torch.vtensor<[1,2,1,16],bf16>
    return %out : !torch.vtensor<[1,2,1,16],bf16>
  }
}
