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
