/* The live model's forward pass in WebAssembly, reading the GGUF file's own Q4_1 and Q8_0 blocks.

   A llama2.c-style forward for SmolLM2 (llmlab.block's order: RMSNorm, attention with RoPE and
   grouped queries, RMSNorm, SwiGLU), for T new tokens after `pos` cached ones. Activations are
   float32; each weight is read straight from its blocks of 32 (w = d * q + m for Q4_1, w = d * q for
   Q8_0), never expanded into a float32 matrix. The KV cache lives in this module's memory.

   The page (assets/live/kernel.js) copies the blocks in once, fills `struct model` with where they
   are, and calls forward(). Built with `python -m llmlab.live.kernel` (zig cc from the ziglang wheel):
   128-bit SIMD, no libc, no imports.

   Numbers: the products are the same sums as llmlab's float32 matmuls in another order (a decode step
   adds one block's d * sum(q x) + m * sum(x) instead of sum((d q + m) x); a prompt adds (d q + m) x
   over 4 lanes), so the logits agree up to float32 rounding (llmlab.numerics), and
   tests/test_live_kernel.py holds them to it. */
#include <stdint.h>
#include <wasm_simd128.h>

typedef v128_t f32x4;
#define Q4_1 20      /* bytes per block of 32 weights: d, m (float16), 16 bytes of 4-bit q */
#define Q8_0 34      /* d (float16), 32 int8 q */
#define MAX_T 256    /* most tokens in one call (a prompt) */

/* ------------------------------------------------------------------ the model, as the page fills it */

struct layer {
    const float *attn_norm, *ffn_norm;                   /* (D,) each */
    const uint8_t *wq, *wk, *wv, *wo;                    /* Q4_1 rows: (H hd, D), (KV hd, D) x 2, (D, H hd) */
    const uint8_t *w_gate, *w_up, *w_down;               /* Q4_1 rows: (F, D) x 2, (D, F) */
};

struct model {
    int32_t n_layers, d, n_heads, n_kv, head_dim, d_ff, vocab, context;
    float eps;
    const uint8_t *embedding;                            /* Q8_0 rows (V, D), tied to the LM head */
    const float *out_norm;                               /* (D,) */
    const float *cos, *sin;                              /* (context, hd/2): llmlab's RoPE tables, one half */
    const float *head_mask;                              /* (L, H): 0 knocks a head out (llmlab's hook_z) */
    const float *steer;                                  /* (L, D): added after each block (resid_post) */
    float *keys, *values;                                /* the cache, (L, KV, context, hd) each */
    struct layer layers[32];
};

static struct model M;
struct model *model(void) { return &M; }

/* A bump allocator over memory.grow: the page asks for its buffers once, nothing is freed. */
extern unsigned char __heap_base;
static uintptr_t heap_top = (uintptr_t)&__heap_base;

void *alloc(uint32_t bytes) {
    uintptr_t start = (heap_top + 15) & ~(uintptr_t)15, end = start + bytes;
    uintptr_t have = __builtin_wasm_memory_size(0) * 65536;
    if (end > have && __builtin_wasm_memory_grow(0, (end - have + 65535) / 65536) == (uintptr_t)-1) return 0;
    heap_top = end;
    return (void *)start;
}

/* ------------------------------------------------------------------ scalars */

/* A finite IEEE float16 -> float32, exactly: the 15 bits moved into float32's places make 2^-112 times the
   number (subnormal halves land on float32 subnormals), and one product puts the exponent right. */
static inline float half_to_float(uint16_t h) {
    const float magnitude = __builtin_bit_cast(float, (uint32_t)(h & 0x7FFF) << 13) * 0x1p112f;
    return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, magnitude) | (uint32_t)(h & 0x8000) << 16);
}

static inline float load_half(const uint8_t *p) { return half_to_float((uint16_t)(p[0] | p[1] << 8)); }

/* e^x to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor series to r^7, times 2^n. */
static float exp_f32(float x) {
    if (x < -103.0f) return 0.0f;
    if (x > 88.7f) return __builtin_inff();
    float n = __builtin_roundevenf(x * 1.44269504f);
    float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;             /* ln2 in two parts: r exact */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f
              + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    int k = (int)n;
    if (k < -126) { p *= 0x1p-24f; k += 24; }                            /* subnormal results */
    return p * __builtin_bit_cast(float, (uint32_t)(k + 127) << 23);
}

static inline float sum4(f32x4 v) {
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1))
         + (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}

/* ------------------------------------------------------------------ products with the blocks */

/* A Q4_1 block's 32 numbers q as floats, in order (element j: byte j's low nibble; j + 16: its high one).
   Each group of 4 bytes is moved into the low bytes of four 32-bit lanes by one byte shuffle (index -1
   gives a zero byte), then converted: two instructions per 4 numbers. */
static inline void unpack_q4(f32x4 q[8], const uint8_t *qs_bytes) {
    const v128_t qs = wasm_v128_load(qs_bytes);
    const v128_t nibbles[2] = {wasm_v128_and(qs, wasm_i8x16_splat(0x0F)), wasm_u8x16_shr(qs, 4)};
    const v128_t lanes[4] = {wasm_i8x16_const(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1),
                             wasm_i8x16_const(4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1),
                             wasm_i8x16_const(8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11, -1, -1, -1),
                             wasm_i8x16_const(12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15, -1, -1, -1)};
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) q[4 * h + i] = wasm_f32x4_convert_i32x4(wasm_i8x16_swizzle(nibbles[h], lanes[i]));
}

/* sum(q x) over one block of 32, as four lanes: a tree of additions (no long chain to wait on). */
static inline f32x4 block_dot(const f32x4 q[8], const float *x) {
    f32x4 p[8];
    for (int i = 0; i < 8; i++) p[i] = wasm_f32x4_mul(q[i], wasm_v128_load(x + 4 * i));
    return wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_add(p[0], p[1]), wasm_f32x4_add(p[2], p[3])),
                          wasm_f32x4_add(wasm_f32x4_add(p[4], p[5]), wasm_f32x4_add(p[6], p[7])));
}

/* Four float16 numbers (the low 16 bits of each 32-bit lane) -> float32, lane by lane: half_to_float's trick. */
static inline f32x4 halves_to_floats(v128_t h) {
    const f32x4 magnitude = wasm_f32x4_mul(wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7FFF)), 13),
                                           wasm_f32x4_splat(0x1p112f));
    return wasm_v128_or(magnitude, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

/* The first 4 bytes of four blocks (of rows n .. n+3, `stride` bytes apart), one block per 32-bit lane:
   a Q4_1 block's d in the low half, its m in the high one. */
static inline v128_t heads4(const uint8_t *block, uintptr_t stride) {
    v128_t h = wasm_v128_load32_zero(block);
    h = wasm_v128_load32_lane(block + stride, h, 1);
    h = wasm_v128_load32_lane(block + 2 * stride, h, 2);
    return wasm_v128_load32_lane(block + 3 * stride, h, 3);
}

/* out (N,) = w x for Q4_1 rows w (N, K/32 blocks), one token (a decode step): sum(w x) = d * sum(q x) +
   m * sum(x) per block, with sum(x) per block computed once (xsum, (K/32,)). Four rows at a time share
   the loads of x, and their four d and four m become floats together (N is a multiple of 4). */
static void matvec_q4_1(float *out, const uint8_t *w, const float *x, const float *xsum, int N, int K) {
    const int nb = K / 32;
    const uintptr_t stride = (uintptr_t)nb * Q4_1;
    f32x4 q[8];
    for (int n = 0; n < N; n += 4) {
        const uint8_t *block = w + n * stride;
        f32x4 acc[4] = {0}, mins = wasm_f32x4_splat(0.0f);
        for (int b = 0; b < nb; b++, block += Q4_1) {
            const v128_t dm = heads4(block, stride);
            const f32x4 m = halves_to_floats(wasm_u32x4_shr(dm, 16));
            float ds[4];
            wasm_v128_store(ds, halves_to_floats(dm));
            mins = wasm_f32x4_add(mins, wasm_f32x4_mul(m, wasm_f32x4_splat(xsum[b])));
            for (int r = 0; r < 4; r++) {
                unpack_q4(q, block + r * stride + 4);
                acc[r] = wasm_f32x4_add(acc[r], wasm_f32x4_mul(block_dot(q, x + b * 32), wasm_f32x4_splat(ds[r])));
            }
        }
        for (int r = 0; r < 4; r++) out[n + r] = sum4(acc[r]);
        wasm_v128_store(out + n, wasm_f32x4_add(wasm_v128_load(out + n), mins));
    }
}

/* out (T, N) = x (T, K) @ w^T for Q4_1 rows w, a prompt (T > 1): four rows at a time are turned into
   float32 once (w = d q + m, the numbers llmlab's matrix holds; panel (4, K)), then every token reads
   them from there. The inner loop keeps 2 rows x 4 tokens of sums in registers, so each load of w
   serves 4 tokens and each load of x serves 2 rows. */
static void matmul_q4_1(float *out, const uint8_t *w, const float *x, float *panel, int N, int K, int T) {
    const int nb = K / 32;
    const uintptr_t stride = (uintptr_t)nb * Q4_1;
    f32x4 q[8];
    for (int n = 0; n < N; n += 4) {
        for (int r = 0; r < 4; r++) {
            const uint8_t *block = w + (n + r) * stride;
            for (int b = 0; b < nb; b++, block += Q4_1) {
                const f32x4 d = wasm_f32x4_splat(load_half(block)), m = wasm_f32x4_splat(load_half(block + 2));
                unpack_q4(q, block + 4);
                for (int i = 0; i < 8; i++)
                    wasm_v128_store(panel + r * K + b * 32 + 4 * i, wasm_f32x4_add(wasm_f32x4_mul(q[i], d), m));
            }
        }
        for (int r = 0; r < 4; r += 2)
            for (int t0 = 0; t0 < T; t0 += 4) {
                const float *xt[4], *w0 = panel + r * K, *w1 = w0 + K;
                for (int t = 0; t < 4; t++) xt[t] = x + (uintptr_t)(t0 + t < T ? t0 + t : T - 1) * K;  /* a short last group repeats a token */
                f32x4 a0[4] = {0}, a1[4] = {0};
                for (int k = 0; k < K; k += 4) {
                    const f32x4 u = wasm_v128_load(w0 + k), v = wasm_v128_load(w1 + k);
                    for (int t = 0; t < 4; t++) {
                        const f32x4 xv = wasm_v128_load(xt[t] + k);
                        a0[t] = wasm_f32x4_add(a0[t], wasm_f32x4_mul(u, xv));
                        a1[t] = wasm_f32x4_add(a1[t], wasm_f32x4_mul(v, xv));
                    }
                }
                for (int t = 0; t < 4 && t0 + t < T; t++) {
                    out[(uintptr_t)(t0 + t) * N + n + r] = sum4(a0[t]);
                    out[(uintptr_t)(t0 + t) * N + n + r + 1] = sum4(a1[t]);
                }
            }
    }
}

/* A Q8_0 block's 32 int8 q as floats times 2^24: each byte is moved into the top byte of a 32-bit lane
   (one byte shuffle), which makes the lane the integer q * 2^24, converted exactly (8 significant bits);
   the block's scale takes the 2^-24 back. */
static inline void unpack_q8(f32x4 q[8], const uint8_t *qs_bytes) {
    const v128_t lanes[4] = {wasm_i8x16_const(-1, -1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3),
                             wasm_i8x16_const(-1, -1, -1, 4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7),
                             wasm_i8x16_const(-1, -1, -1, 8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11),
                             wasm_i8x16_const(-1, -1, -1, 12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15)};
    for (int h = 0; h < 2; h++) {
        const v128_t qs = wasm_v128_load(qs_bytes + 16 * h);
        for (int i = 0; i < 4; i++) q[4 * h + i] = wasm_f32x4_convert_i32x4(wasm_i8x16_swizzle(qs, lanes[i]));
    }
}

/* out (N,) = w x for Q8_0 rows w (N, K/32 blocks): the LM head, one token. */
static void matvec_q8_0(float *out, const uint8_t *w, const float *x, int N, int K) {
    const int nb = K / 32;
    f32x4 q[8];
    for (int n = 0; n < N; n++) {
        const uint8_t *block = w + (uintptr_t)n * nb * Q8_0;
        f32x4 acc = wasm_f32x4_splat(0.0f);
        for (int b = 0; b < nb; b++, block += Q8_0) {
            unpack_q8(q, block + 2);
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(block_dot(q, x + b * 32), wasm_f32x4_splat(load_half(block) * 0x1p-24f)));
        }
        out[n] = sum4(acc);
    }
}

/* The sums of each block of 32 of x (K,): the m * sum(x) part of a Q4_1 product. */
static void block_sums(float *xsum, const float *x, int K) {
    for (int b = 0; b < K / 32; b++) {
        f32x4 s = wasm_v128_load(x + b * 32);
        for (int i = 1; i < 8; i++) s = wasm_f32x4_add(s, wasm_v128_load(x + b * 32 + 4 * i));
        xsum[b] = sum4(s);
    }
}

/* ------------------------------------------------------------------ the pieces of a block */

/* out = x / sqrt(mean(x^2) + eps) * w, each of the T rows of x (T, D) (llmlab.norms.rms_norm). */
static void rms_norm(float *out, const float *x, const float *w, int D, int T) {
    for (int t = 0; t < T; t++, x += D, out += D) {
        f32x4 s = wasm_f32x4_splat(0.0f);
        for (int i = 0; i < D; i += 4) { f32x4 v = wasm_v128_load(x + i); s = wasm_f32x4_add(s, wasm_f32x4_mul(v, v)); }
        const float r = 1.0f / __builtin_sqrtf(sum4(s) / D + M.eps);
        for (int i = 0; i < D; i++) out[i] = x[i] * r * w[i];
    }
}

/* Rotate each head of x (heads * hd) at position p: pairs (j, j + hd/2) turn by angle p * inv_freq_j. */
static void rope(float *x, int heads, int p) {
    const int hd = M.head_dim, half = hd / 2;
    const float *c = M.cos + p * half, *s = M.sin + p * half;
    for (int h = 0; h < heads; h++, x += hd)
        for (int j = 0; j < half; j++) {
            const float a = x[j], b = x[j + half];
            x[j] = a * c[j] - b * s[j];
            x[j + half] = b * c[j] + a * s[j];
        }
}

static inline float dot(const float *a, const float *b, int n) {   /* n a multiple of 4 */
    f32x4 s = wasm_f32x4_splat(0.0f);
    for (int i = 0; i < n; i += 4) s = wasm_f32x4_add(s, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
    return sum4(s);
}

/* One query (hd,) at position p against keys 0..p of one key/value head: softmax(q k / sqrt(hd)) v. */
static void attend(float *out, const float *q, const float *keys, const float *values, int p, float *scores) {
    const int hd = M.head_dim;
    const float scale = 1.0f / __builtin_sqrtf((float)hd);
    float top = -__builtin_inff(), total = 0.0f;
    for (int j = 0; j <= p; j++) {
        scores[j] = dot(q, keys + j * hd, hd) * scale;
        if (scores[j] > top) top = scores[j];
    }
    for (int j = 0; j <= p; j++) { scores[j] = exp_f32(scores[j] - top); total += scores[j]; }
    for (int i = 0; i < hd; i++) out[i] = 0.0f;
    for (int j = 0; j <= p; j++) {
        const f32x4 w = wasm_f32x4_splat(scores[j] / total);
        for (int i = 0; i < hd; i += 4)
            wasm_v128_store(out + i, wasm_f32x4_add(wasm_v128_load(out + i), wasm_f32x4_mul(w, wasm_v128_load(values + j * hd + i))));
    }
}

/* ------------------------------------------------------------------ the forward pass */

static float *scratch(int floats) { return (float *)alloc(4 * (uint32_t)floats); }

static float *x_, *h_, *q_, *k_, *v_, *z_, *gate_, *up_, *xsum_, *panel_, *scores_, *logits_;

/* The buffers for up to MAX_T tokens at once, once the page has filled the model's sizes. */
int setup(void) {
    const int D = M.d, F = M.d_ff, Hd = M.n_heads * M.head_dim, KVd = M.n_kv * M.head_dim;
    if (M.n_layers > 32 || D % 32 || F % 32 || Hd % 32 || M.head_dim % 4) return 0;
    x_ = scratch(MAX_T * D); h_ = scratch(MAX_T * D); q_ = scratch(MAX_T * Hd); k_ = scratch(MAX_T * KVd);
    v_ = scratch(MAX_T * KVd); z_ = scratch(MAX_T * Hd); gate_ = scratch(MAX_T * F); up_ = scratch(MAX_T * F);
    xsum_ = scratch(F / 32); panel_ = scratch(4 * F); scores_ = scratch(M.context); logits_ = scratch(M.vocab);
    M.keys = scratch(M.n_layers * KVd * M.context);
    M.values = scratch(M.n_layers * KVd * M.context);
    return x_ && h_ && q_ && k_ && v_ && z_ && gate_ && up_ && xsum_ && panel_ && scores_ && logits_ && M.keys && M.values;
}

static void linear(float *out, const uint8_t *w, const float *x, int N, int K, int T) {
    if (T > 1) { matmul_q4_1(out, w, x, panel_, N, K, T); return; }
    block_sums(xsum_, x, K);
    matvec_q4_1(out, w, x, xsum_, N, K);
}

/* T tokens (ids) at positions pos .. pos+T-1, after pos cached ones: fills the cache and returns the
   last token's logits (V,). 0 when T or pos is out of range. */
float *forward(const int32_t *ids, int T, int pos) {
    const int D = M.d, F = M.d_ff, H = M.n_heads, KV = M.n_kv, hd = M.head_dim, G = H / KV;
    if (T < 1 || T > MAX_T || pos < 0 || pos + T > M.context) return 0;
    for (int t = 0; t < T; t++) {                                     /* the embedding: one Q8_0 row each */
        const uint8_t *block = M.embedding + (uintptr_t)ids[t] * (D / 32) * Q8_0;
        for (int b = 0; b < D / 32; b++, block += Q8_0) {
            const float d = load_half(block);
            for (int i = 0; i < 32; i++) x_[t * D + b * 32 + i] = d * (float)(int8_t)block[2 + i];
        }
    }
    for (int l = 0; l < M.n_layers; l++) {
        const struct layer *w = &M.layers[l];
        float *keys = M.keys + (uintptr_t)l * KV * M.context * hd, *values = M.values + (uintptr_t)l * KV * M.context * hd;
        rms_norm(h_, x_, w->attn_norm, D, T);
        linear(q_, w->wq, h_, H * hd, D, T);                          /* (T, H hd) */
        linear(k_, w->wk, h_, KV * hd, D, T);                         /* (T, KV hd) */
        linear(v_, w->wv, h_, KV * hd, D, T);
        for (int t = 0; t < T; t++) {
            rope(q_ + t * H * hd, H, pos + t);
            rope(k_ + t * KV * hd, KV, pos + t);
            for (int g = 0; g < KV; g++)                              /* into the cache, (KV, context, hd) */
                for (int i = 0; i < hd; i++) {
                    keys[((uintptr_t)g * M.context + pos + t) * hd + i] = k_[(t * KV + g) * hd + i];
                    values[((uintptr_t)g * M.context + pos + t) * hd + i] = v_[(t * KV + g) * hd + i];
                }
        }
        for (int t = 0; t < T; t++)                                   /* query head j reads key/value head j / G */
            for (int j = 0; j < H; j++) {
                float *z = z_ + (t * H + j) * hd;
                const uintptr_t at = (uintptr_t)(j / G) * M.context * hd;
                attend(z, q_ + (t * H + j) * hd, keys + at, values + at, pos + t, scores_);
                const float keep = M.head_mask[l * H + j];
                if (keep != 1.0f) for (int i = 0; i < hd; i++) z[i] *= keep;
            }
        linear(h_, w->wo, z_, D, H * hd, T);                          /* (T, D) */
        for (int i = 0; i < T * D; i++) x_[i] += h_[i];
        rms_norm(h_, x_, w->ffn_norm, D, T);
        linear(gate_, w->w_gate, h_, F, D, T);                        /* (T, F) */
        linear(up_, w->w_up, h_, F, D, T);
        for (int i = 0; i < T * F; i++) gate_[i] = gate_[i] / (1.0f + exp_f32(-gate_[i])) * up_[i];   /* SwiGLU */
        linear(h_, w->w_down, gate_, D, F, T);                        /* (T, D) */
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++) x_[t * D + i] = (x_[t * D + i] + h_[t * D + i]) + M.steer[l * D + i];
    }
    rms_norm(h_, x_ + (T - 1) * D, M.out_norm, D, 1);                 /* the last token's readout */
    matvec_q8_0(logits_, M.embedding, h_, M.vocab, D);
    return logits_;
}
