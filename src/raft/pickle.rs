//! A small unpickler for the pickles pysyncobj sends (protocol 2), safe on hostile input.
//!
//! Why hand-written rather than `serde-pickle`:
//! * On a leader, the status dict's `leader` is a `BINGET` of the memoized `self`
//!   instance. serde-pickle memoizes the NEWOBJ stand-in and does not update the memo on
//!   BUILD, so the aliased `leader` decodes to `{}` instead of the node (protocol notes
//!   §6.2). Here objects live in an arena and BUILD mutates the shared object, so every
//!   alias sees the built state.
//! * A general unpickler is a remote-code-execution surface (`GLOBAL os system` +
//!   `REDUCE`). This one knows exactly two callables: `_codecs.encode` (how protocol 2
//!   writes `bytes`) and the `pysyncobj.node` classes `TCPNode`/`Node`, which are never
//!   called but only recorded as [`Value::Object`]. Every other global is an error.
//! * It is bounded: an item budget (objects, container entries, memo entries, marks), a
//!   nesting depth limit applied while building the result (which also cuts reference
//!   cycles built through the memo), and no recursion except that depth-bounded one.
//!
//! Supported opcodes: `PROTO STOP MARK EMPTY_DICT EMPTY_LIST EMPTY_TUPLE SETITEM SETITEMS
//! APPEND APPENDS TUPLE TUPLE1 TUPLE2 TUPLE3 BINUNICODE BININT1 BININT2 BININT LONG1
//! NEWTRUE NEWFALSE NONE BINPUT LONG_BINPUT BINGET LONG_BINGET GLOBAL REDUCE NEWOBJ BUILD`.
//! That is every opcode seen in captures of pysyncobj 0.3.12/0.3.17 and Patroni, plus the
//! few a larger cluster or other values could produce. Anything else is a decode error.
//!
//! Python dict semantics are kept loosely: a dict is a list of `(key, value)` pairs in
//! insertion order; [`Value::get`] returns the *last* value for a key, as a Python dict
//! would hold after duplicate `SETITEM`s. (No hashing while decoding keeps hostile input
//! from costing quadratic time.)

use std::cell::RefCell;
use std::sync::Arc;

use super::RaftError;

/// Hard cap on nesting depth, whatever the caller's limit: result building and dropping
/// recurse once per level.
pub const HARD_MAX_DEPTH: usize = 256;

/// The Python classes this decoder accepts as instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeClass {
    /// `pysyncobj.node.TCPNode`
    TcpNode,
    /// `pysyncobj.node.Node`
    Node,
}

/// A decoded pickle value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Str(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    /// An instance of a pysyncobj node class with its `__dict__` (from BUILD).
    Object {
        class: NodeClass,
        state: Vec<(Value, Value)>,
    },
}

impl Value {
    /// Builds a `Str`.
    pub fn str(s: &str) -> Value {
        Value::Str(Arc::from(s))
    }

    /// Builds a `Bytes`.
    pub fn bytes(b: &[u8]) -> Value {
        Value::Bytes(Arc::from(b))
    }

    /// The string, if this is a `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// For a `Dict` or an `Object`'s state: the last value stored under the string `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let pairs = match self {
            Value::Dict(p) => p,
            Value::Object { state, .. } => state,
            _ => return None,
        };
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// What this is, as a status field reads it ([`Node::scalar`] for a [`Node`]).
    pub fn scalar(&self) -> Scalar<'_> {
        match self {
            Value::None => Scalar::None,
            Value::Bool(flag) => Scalar::Bool(*flag),
            Value::Int(int) => Scalar::Int(*int),
            Value::Str(text) => Scalar::Str(text),
            Value::Object { .. } => Scalar::Object,
            other => Scalar::Other(other.type_name()),
        }
    }

    /// A short type name for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Object { .. } => "object",
        }
    }
}

/// Limits for [`decode`]; the default is what the exporter uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PickleLimits {
    /// Deepest container nesting accepted. Default 32 (a status reply has 3).
    pub max_depth: usize,
    /// Largest number of objects (values, container entries, memo entries). Default
    /// 100 000.
    pub max_items: usize,
}

impl Default for PickleLimits {
    fn default() -> Self {
        PickleLimits {
            max_depth: 32,
            max_items: 100_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Global {
    CodecsEncode,
    Class(NodeClass),
}

/// An object of the machine's arena. Containers hold arena ids (the memo can share one
/// object between several places); a `str` stays in the pickle's bytes until a [`Value`] is
/// built ([`Node`] reads it there).
#[derive(Debug)]
enum Obj<'a> {
    None,
    Bool(bool),
    Int(i64),
    /// `bytes` (REDUCE of `_codecs.encode`), kept as decoded until a [`Value`] is built.
    Bytes(Vec<u8>),
    /// A `str` (BINUNICODE), checked UTF-8.
    Str(&'a str),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
    Global(Global),
    Instance {
        class: NodeClass,
        states: Vec<usize>,
    },
}

struct Machine<'a> {
    data: &'a [u8],
    pos: usize,
    arena: Vec<Obj<'a>>,
    stack: Vec<usize>,
    marks: Vec<usize>,
    /// The arena id memoized under each index, [`NO_OBJECT`] where none is. A vector, not a
    /// map: Python's pickler numbers its memo from 0 up, one entry per memoized object, so an
    /// index is a slot and no BINPUT or BINGET hashes.
    memo: Vec<usize>,
    items: usize,
    max_items: usize,
}

/// A memo slot no PUT has filled.
const NO_OBJECT: usize = usize::MAX;

fn err(msg: impl Into<String>) -> RaftError {
    RaftError::decode(format!("pickle: {}", msg.into()))
}

impl<'a> Machine<'a> {
    fn charge(&mut self, n: usize) -> Result<(), RaftError> {
        self.items = self.items.saturating_add(n);
        if self.items > self.max_items {
            return Err(err(format!("more than {} items", self.max_items)));
        }
        Ok(())
    }

    fn alloc(&mut self, obj: Obj<'a>) -> Result<usize, RaftError> {
        self.charge(1)?;
        self.arena.push(obj);
        Ok(self.arena.len() - 1)
    }

    fn push_new(&mut self, obj: Obj<'a>) -> Result<(), RaftError> {
        let id = self.alloc(obj)?;
        self.stack.push(id);
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RaftError> {
        if self.data.len() - self.pos < n {
            return Err(err("truncated input"));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, RaftError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, RaftError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, RaftError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn line(&mut self) -> Result<&'a str, RaftError> {
        const MAX_LINE: usize = 256;
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .take(MAX_LINE)
            .position(|&c| c == b'\n')
            .ok_or_else(|| err("GLOBAL name too long or unterminated"))?;
        self.pos += end + 1;
        std::str::from_utf8(&rest[..end]).map_err(|_| err("GLOBAL name is not UTF-8"))
    }

    fn pop(&mut self) -> Result<usize, RaftError> {
        let top = self.top()?;
        self.stack.pop();
        Ok(top)
    }

    fn top(&self) -> Result<usize, RaftError> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(err("stack underflow (at mark)"));
        }
        self.stack
            .last()
            .copied()
            .ok_or_else(|| err("stack underflow"))
    }

    fn pop_mark(&mut self) -> Result<Vec<usize>, RaftError> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| err("no MARK on the stack"))?;
        Ok(self.stack.split_off(m))
    }

    /// For SETITEMS and APPENDS: pops the last MARK and returns where the items pushed since
    /// begin on the stack and the container under them, as [`Machine::pop_mark`] then
    /// [`Machine::top`] would, without moving the items into a vector of their own.
    fn items_since_mark(&mut self) -> Result<(usize, usize), RaftError> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| err("no MARK on the stack"))?;
        if m == 0 {
            return Err(err("stack underflow"));
        }
        if self.marks.last().is_some_and(|&inner| inner >= m) {
            return Err(err("stack underflow (at mark)"));
        }
        Ok((m, self.stack[m - 1]))
    }

    /// BININT1, BININT2, BININT: an int of 1 or 2 unsigned bytes, or of 4 signed ones.
    fn binint(&mut self, op: u8) -> Result<i64, RaftError> {
        Ok(match op {
            b'K' => i64::from(self.u8()?),
            b'M' => i64::from(self.u16()?),
            _ => i64::from(self.u32()? as i32),
        })
    }

    /// The index of a memo opcode: 1 byte (BINPUT, BINGET), or 4 when `wide` (LONG_BINPUT,
    /// LONG_BINGET).
    fn memo_index(&mut self, wide: bool) -> Result<u32, RaftError> {
        if wide {
            self.u32()
        } else {
            self.u8().map(u32::from)
        }
    }

    fn memo_put(&mut self, wide: bool) -> Result<(), RaftError> {
        let idx = self.memo_index(wide)? as usize;
        let top = self.top()?;
        if idx >= self.memo.len() {
            // Every slot made counts as an item, so that a sparse index (LONG_BINPUT of
            // 4 000 000 000) is refused by the item limit before any memory is taken.
            self.charge((idx - self.memo.len()).saturating_add(1))?;
            self.memo.resize(idx + 1, NO_OBJECT);
        }
        self.memo[idx] = top;
        Ok(())
    }

    fn memo_get(&mut self, wide: bool) -> Result<(), RaftError> {
        let idx = self.memo_index(wide)?;
        let id = self
            .memo
            .get(idx as usize)
            .copied()
            .filter(|&id| id != NO_OBJECT)
            .ok_or_else(|| err(format!("memo key {idx} not found")))?;
        self.stack.push(id);
        Ok(())
    }

    fn tuple_of(&mut self, n: usize) -> Result<(), RaftError> {
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.pop()?);
        }
        items.reverse();
        self.charge(n)?;
        self.push_new(Obj::Tuple(items))
    }

    /// APPEND: the value on top into the list under it.
    fn append(&mut self) -> Result<(), RaftError> {
        let v = self.pop()?;
        self.charge(1)?;
        let target = self.top()?;
        extend_list(&mut self.arena, target, &[v])
    }

    /// SETITEM: the key and value on top into the dict under them.
    fn set_item(&mut self) -> Result<(), RaftError> {
        let v = self.pop()?;
        let k = self.pop()?;
        self.charge(1)?;
        let target = self.top()?;
        extend_dict(&mut self.arena, target, &[k, v])
    }

    /// APPENDS (`per_entry` 1, [`extend_list`]) and SETITEMS (2, [`extend_dict`]): the items
    /// since the last MARK into the container under them, charged per entry.
    fn extend_from_mark(&mut self, per_entry: usize, extend: Extend) -> Result<(), RaftError> {
        let (from, target) = self.items_since_mark()?;
        let n = self.stack.len() - from;
        if n % per_entry != 0 {
            return Err(err("SETITEMS with an odd number of items"));
        }
        self.charge(n / per_entry)?;
        extend(&mut self.arena, target, &self.stack[from..])?;
        self.stack.truncate(from);
        Ok(())
    }

    fn global(&mut self) -> Result<(), RaftError> {
        let module = self.line()?;
        let name = self.line()?;
        let g = match (module, name) {
            ("_codecs", "encode") => Global::CodecsEncode,
            ("pysyncobj.node", "TCPNode") => Global::Class(NodeClass::TcpNode),
            ("pysyncobj.node", "Node") => Global::Class(NodeClass::Node),
            _ => {
                let shown: String = format!("{module}.{name}").chars().take(80).collect();
                return Err(err(format!("forbidden global {shown:?}")));
            }
        };
        self.push_new(Obj::Global(g))
    }

    fn reduce(&mut self) -> Result<(), RaftError> {
        let args = self.pop()?;
        let func = self.pop()?;
        if !matches!(self.arena[func], Obj::Global(Global::CodecsEncode)) {
            return Err(err("REDUCE of something other than _codecs.encode"));
        }
        let (text, encoding) = match &self.arena[args] {
            Obj::Tuple(t) if t.len() == 2 => match (&self.arena[t[0]], &self.arena[t[1]]) {
                (Obj::Str(text), Obj::Str(encoding)) => (*text, *encoding),
                _ => return Err(err("_codecs.encode arguments are not (str, str)")),
            },
            _ => return Err(err("_codecs.encode needs a 2-tuple")),
        };
        if !matches!(
            encoding,
            "latin1" | "latin-1" | "latin_1" | "iso-8859-1" | "iso8859-1"
        ) {
            return Err(err("_codecs.encode with an encoding other than latin1"));
        }
        let mut bytes = Vec::with_capacity(text.len());
        for c in text.chars() {
            bytes.push(
                u8::try_from(u32::from(c)).map_err(|_| err("non-latin1 character in bytes"))?,
            );
        }
        self.push_new(Obj::Bytes(bytes))
    }

    fn newobj(&mut self) -> Result<(), RaftError> {
        let args = self.pop()?;
        let cls = self.pop()?;
        let class = match self.arena[cls] {
            Obj::Global(Global::Class(c)) => c,
            _ => return Err(err("NEWOBJ of something other than a pysyncobj node class")),
        };
        match &self.arena[args] {
            Obj::Tuple(t) if t.is_empty() => {}
            _ => return Err(err("NEWOBJ with arguments")),
        }
        self.push_new(Obj::Instance {
            class,
            states: Vec::new(),
        })
    }

    fn build(&mut self) -> Result<(), RaftError> {
        let state = self.pop()?;
        if !matches!(self.arena[state], Obj::Dict(_)) {
            return Err(err("BUILD state is not a dict"));
        }
        let target = self.top()?;
        self.charge(1)?;
        match &mut self.arena[target] {
            // Mutate the shared instance: memo aliases (leader = BINGET self) see it.
            Obj::Instance { states, .. } => {
                states.push(state);
                Ok(())
            }
            _ => Err(err("BUILD target is not a node instance")),
        }
    }

    fn run(&mut self) -> Result<usize, RaftError> {
        loop {
            let at = self.pos;
            let op = self.u8().map_err(|_| err("missing STOP"))?;
            match op {
                0x80 => {
                    let v = self.u8()?;
                    if v > 5 {
                        return Err(err(format!("unsupported protocol {v}")));
                    }
                }
                b'.' => return self.pop(),
                b'(' => {
                    self.charge(1)?;
                    self.marks.push(self.stack.len());
                }
                b'}' => self.push_new(Obj::Dict(Vec::new()))?,
                b']' => self.push_new(Obj::List(Vec::new()))?,
                b')' => self.push_new(Obj::Tuple(Vec::new()))?,
                b's' => self.set_item()?,
                b'u' => self.extend_from_mark(2, extend_dict)?,
                b'a' => self.append()?,
                b'e' => self.extend_from_mark(1, extend_list)?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.charge(items.len())?;
                    self.push_new(Obj::Tuple(items))?;
                }
                0x85 => self.tuple_of(1)?,
                0x86 => self.tuple_of(2)?,
                0x87 => self.tuple_of(3)?,
                b'X' => {
                    let n = self.u32()? as usize;
                    let raw = self.take(n)?;
                    let s = std::str::from_utf8(raw).map_err(|_| err("BINUNICODE is not UTF-8"))?;
                    self.push_new(Obj::Str(s))?;
                }
                b'K' | b'M' | b'J' => {
                    let v = self.binint(op)?;
                    self.push_new(Obj::Int(v))?;
                }
                0x8a => {
                    let n = usize::from(self.u8()?);
                    let raw = self.take(n)?;
                    if n > 8 {
                        return Err(err(format!("LONG1 of {n} bytes does not fit in i64")));
                    }
                    let v = if n == 0 {
                        0
                    } else {
                        let fill = if raw[n - 1] & 0x80 != 0 { 0xff } else { 0 };
                        let mut b = [fill; 8];
                        b[..n].copy_from_slice(raw);
                        i64::from_le_bytes(b)
                    };
                    self.push_new(Obj::Int(v))?;
                }
                0x88 => self.push_new(Obj::Bool(true))?,
                0x89 => self.push_new(Obj::Bool(false))?,
                b'N' => self.push_new(Obj::None)?,
                b'q' => self.memo_put(false)?,
                b'r' => self.memo_put(true)?,
                b'h' => self.memo_get(false)?,
                b'j' => self.memo_get(true)?,
                b'c' => self.global()?,
                b'R' => self.reduce()?,
                0x81 => self.newobj()?,
                b'b' => self.build()?,
                other => {
                    return Err(err(format!(
                        "unsupported opcode {other:#04x} at offset {at}"
                    )));
                }
            }
        }
    }
}

/// How [`Machine::extend_from_mark`] adds items to a container of the arena.
type Extend = fn(&mut [Obj<'_>], usize, &[usize]) -> Result<(), RaftError>;

/// Appends `items` to the list `target` of `arena`.
fn extend_list(arena: &mut [Obj<'_>], target: usize, items: &[usize]) -> Result<(), RaftError> {
    match &mut arena[target] {
        Obj::List(l) => {
            l.extend_from_slice(items);
            Ok(())
        }
        _ => Err(err("APPEND(S) target is not a list")),
    }
}

/// Appends `items`, keys and values taking turns, to the dict `target` of `arena`.
fn extend_dict(arena: &mut [Obj<'_>], target: usize, items: &[usize]) -> Result<(), RaftError> {
    match &mut arena[target] {
        Obj::Dict(d) => {
            d.extend(items.chunks_exact(2).map(|kv| (kv[0], kv[1])));
            Ok(())
        }
        _ => Err(err("SETITEM(S) target is not a dict")),
    }
}

struct Builder<'m> {
    arena: &'m [Obj<'m>],
    budget: usize,
    max_depth: usize,
}

impl Builder<'_> {
    fn spend(&mut self, n: usize) -> Result<(), RaftError> {
        self.budget = self.budget.checked_sub(n).ok_or_else(|| {
            err("result too large (shared references expand past the item limit)")
        })?;
        Ok(())
    }

    fn value(&mut self, id: usize, depth: usize) -> Result<Value, RaftError> {
        if depth > self.max_depth {
            return Err(err(format!(
                "nesting deeper than {} (or a reference cycle)",
                self.max_depth
            )));
        }
        self.spend(1)?;
        Ok(match &self.arena[id] {
            Obj::None => Value::None,
            Obj::Bool(flag) => Value::Bool(*flag),
            Obj::Int(int) => Value::Int(*int),
            Obj::Str(text) => Value::str(text),
            Obj::Bytes(bytes) => Value::bytes(bytes),
            Obj::List(items) => Value::List(self.seq(items, depth)?),
            Obj::Tuple(items) => Value::Tuple(self.seq(items, depth)?),
            Obj::Dict(pairs) => Value::Dict(self.pairs(pairs, depth)?),
            Obj::Global(_) => return Err(err("a bare global in the result")),
            Obj::Instance { class, states } => {
                let mut state = Vec::new();
                for &s in states {
                    if let Obj::Dict(pairs) = &self.arena[s] {
                        state.extend(self.pairs(pairs, depth)?);
                    }
                }
                Value::Object {
                    class: *class,
                    state,
                }
            }
        })
    }

    fn seq(&mut self, items: &[usize], depth: usize) -> Result<Vec<Value>, RaftError> {
        self.spend(items.len())?;
        items.iter().map(|&i| self.value(i, depth + 1)).collect()
    }

    fn pairs(
        &mut self,
        pairs: &[(usize, usize)],
        depth: usize,
    ) -> Result<Vec<(Value, Value)>, RaftError> {
        self.spend(pairs.len())?;
        pairs
            .iter()
            .map(|&(k, v)| Ok((self.value(k, depth + 1)?, self.value(v, depth + 1)?)))
            .collect()
    }
}

/// Decodes one pickle into a [`Value`]. Bytes after `STOP` are ignored, as `pickle.loads`
/// does.
pub fn decode(data: &[u8], limits: PickleLimits) -> Result<Value, RaftError> {
    decode_with(data, limits, |root| root.to_value(limits))
}

/// Decodes one pickle and hands its root to `read` as a [`Node`]: read in place, its
/// strings borrowed from `data`. What `read` returns is the result.
///
/// Why beside [`decode`]: a status reply is read once, for a dozen of its values, and a
/// [`Value`] tree made a `str` for each of its keys (two dozen, more with partners) and a
/// vector for each container, all dropped at once: about 60 allocations per reply, three
/// replies per poll of every cluster.
pub fn decode_with<R>(
    data: &[u8],
    limits: PickleLimits,
    read: impl FnOnce(Node<'_>) -> Result<R, RaftError>,
) -> Result<R, RaftError> {
    // Room for about one object per 8 bytes (a status has ~200), so that the arena and the
    // memo do not grow in steps for every reply; bounded by the item limit.
    let objects = (data.len() / 8).min(limits.max_items);
    let mut scratch = SCRATCH.with(|kept| std::mem::take(&mut *kept.borrow_mut()));
    scratch.memo.reserve(objects);
    let mut m = Machine {
        data,
        pos: 0,
        arena: Vec::with_capacity(objects),
        stack: scratch.stack,
        marks: scratch.marks,
        memo: scratch.memo,
        items: 0,
        max_items: limits.max_items,
    };
    let result = m.run().and_then(|root| {
        read(Node {
            arena: &m.arena,
            id: root,
        })
    });
    SCRATCH.with(|kept| *kept.borrow_mut() = Scratch::after(m.stack, m.marks, m.memo));
    result
}

/// The machine's vectors of indexes, kept by each thread between two pickles: three
/// allocations fewer per pickle (six pickles per poll of a cluster with a password). The
/// arena is not kept: it borrows the pickle's bytes.
#[derive(Default)]
struct Scratch {
    stack: Vec<usize>,
    marks: Vec<usize>,
    memo: Vec<usize>,
}

impl Scratch {
    /// The largest vector kept, in indexes: a status reply's memo is a few hundred; the
    /// rest of a hostile pickle's is given back.
    const MAX_KEPT: usize = 4096;

    fn after(stack: Vec<usize>, marks: Vec<usize>, memo: Vec<usize>) -> Scratch {
        let kept = |mut indexes: Vec<usize>| {
            if indexes.capacity() > Self::MAX_KEPT {
                return Vec::new();
            }
            indexes.clear();
            indexes
        };
        Scratch {
            stack: kept(stack),
            marks: kept(marks),
            memo: kept(memo),
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// A value of a decoded pickle, read where the decoder left it ([`decode_with`]).
///
/// Reading never recurses: a caller walks as deep as it looks, so a value shared through
/// the memo, or a cycle built with it, costs nothing until [`Node::to_value`] expands it
/// (within the limits' depth and items).
#[derive(Clone, Copy)]
pub struct Node<'p> {
    arena: &'p [Obj<'p>],
    id: usize,
}

/// A [`Node`] as a status field reads it: a scalar, or which other kind of value it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'p> {
    None,
    Bool(bool),
    Int(i64),
    Str(&'p str),
    /// A pysyncobj node instance ([`Node::get`] reads its state).
    Object,
    /// Any other kind, by its [`Value::type_name`].
    Other(&'static str),
}

impl<'p> Node<'p> {
    fn at(self, id: usize) -> Node<'p> {
        Node {
            arena: self.arena,
            id,
        }
    }

    /// The string, if this is a `str`.
    pub fn as_str(self) -> Option<&'p str> {
        match self.arena[self.id] {
            Obj::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The bytes, if these are `bytes`.
    pub fn as_bytes(self) -> Option<&'p [u8]> {
        match &self.arena[self.id] {
            Obj::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// The items, if this is a tuple.
    pub fn tuple_items(self) -> Option<impl ExactSizeIterator<Item = Node<'p>>> {
        match &self.arena[self.id] {
            Obj::Tuple(items) => Some(items.iter().map(move |&id| self.at(id))),
            _ => None,
        }
    }

    /// The `(key, value)` pairs of a dict, or of a node instance's state, in the order
    /// written (as [`Value::Dict`] and [`Value::Object`] hold them); `None` for other kinds.
    pub fn entries(self) -> Option<Entries<'p>> {
        let (pairs, states): (&[(usize, usize)], &[usize]) = match &self.arena[self.id] {
            Obj::Dict(pairs) => (pairs, &[]),
            Obj::Instance { states, .. } => (&[], states),
            _ => return None,
        };
        Some(Entries {
            arena: self.arena,
            pairs: pairs.iter(),
            states: states.iter(),
        })
    }

    /// As [`Value::get`]: the last value stored under the string `key`.
    pub fn get(self, key: &str) -> Option<Node<'p>> {
        self.entries()?
            .filter(|(k, _)| k.as_str() == Some(key))
            .last()
            .map(|(_, value)| value)
    }

    /// What this is, as a status field reads it.
    pub fn scalar(self) -> Scalar<'p> {
        match &self.arena[self.id] {
            Obj::None => Scalar::None,
            Obj::Bool(flag) => Scalar::Bool(*flag),
            Obj::Int(int) => Scalar::Int(*int),
            Obj::Str(text) => Scalar::Str(text),
            Obj::Instance { .. } => Scalar::Object,
            _ => Scalar::Other(self.type_name()),
        }
    }

    /// A short type name for error messages, as [`Value::type_name`] gives it.
    pub fn type_name(self) -> &'static str {
        match &self.arena[self.id] {
            Obj::None => "None",
            Obj::Bool(_) => "bool",
            Obj::Int(_) => "int",
            Obj::Str(_) => "str",
            Obj::Bytes(_) => "bytes",
            Obj::List(_) => "list",
            Obj::Tuple(_) => "tuple",
            Obj::Dict(_) => "dict",
            Obj::Global(_) => "global",
            Obj::Instance { .. } => "object",
        }
    }

    /// The [`Value`] this is, expanded within `limits` (depth, and items of shared values).
    ///
    /// # Errors
    /// Nesting deeper than the limit (or a cycle), more items than the limit, a bare global.
    pub fn to_value(self, limits: PickleLimits) -> Result<Value, RaftError> {
        Builder {
            arena: self.arena,
            budget: limits.max_items,
            max_depth: limits.max_depth.min(HARD_MAX_DEPTH),
        }
        .value(self.id, 0)
    }
}

/// The pairs of [`Node::entries`].
pub struct Entries<'p> {
    arena: &'p [Obj<'p>],
    pairs: std::slice::Iter<'p, (usize, usize)>,
    /// An instance's states still to read (BUILD dicts; any other kind is passed over, as
    /// [`Node::to_value`] does).
    states: std::slice::Iter<'p, usize>,
}

impl<'p> Iterator for Entries<'p> {
    type Item = (Node<'p>, Node<'p>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(&(key, value)) = self.pairs.next() {
                let node = |id| Node {
                    arena: self.arena,
                    id,
                };
                return Some((node(key), node(value)));
            }
            let &state = self.states.next()?;
            if let Obj::Dict(pairs) = &self.arena[state] {
                self.pairs = pairs.iter();
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.pairs.len(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;

    fn limits(max_depth: usize, max_items: usize) -> PickleLimits {
        PickleLimits {
            max_depth,
            max_items,
        }
    }

    fn lim() -> PickleLimits {
        limits(32, 10_000)
    }

    /// `head`, `times` copies of `item`, then `tail`: a pickle with a long run of one opcode
    /// sequence.
    fn repeated(head: &[u8], item: &[u8], times: usize, tail: &[u8]) -> Vec<u8> {
        [head, &item.repeat(times), tail].concat()
    }

    #[test]
    fn simple_values() {
        // ['status']
        let p = b"\x80\x02]q\x00X\x06\x00\x00\x00statusq\x01a.";
        assert_eq!(
            decode(p, lim()).unwrap(),
            Value::List(vec![Value::str("status")])
        );
        // ints of every width
        let p = b"\x80\x02(K\x05M\x00\x01J\xff\xff\xff\xff\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x8a\x00\x8a\x02\xff\x00\x8a\x01\xfft.";
        assert_eq!(
            decode(p, lim()).unwrap(),
            Value::Tuple(vec![
                Value::Int(5),
                Value::Int(256),
                Value::Int(-1),
                Value::Int(i64::MAX),
                Value::Int(0),
                Value::Int(255),
                Value::Int(-1)
            ])
        );
        let p = b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.";
        assert_eq!(decode(p, lim()).unwrap_err().kind(), ErrorKind::Decode);
    }

    #[test]
    fn codecs_bytes() {
        let p = b"\x80\x02c_codecs\nencode\nq\x00X\x04\x00\x00\x00a\xc3\xbf\x00q\x01X\x06\x00\x00\x00latin1q\x02\x86q\x03Rq\x04.";
        assert_eq!(decode(p, lim()).unwrap(), Value::bytes(&[b'a', 0xff, 0]));
        // a code point above 255 is not latin-1
        let p = b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00\xc4\x80X\x06\x00\x00\x00latin1\x86R.";
        assert_eq!(decode(p, lim()).unwrap_err().kind(), ErrorKind::Decode);
    }

    #[test]
    fn forbidden_globals() {
        // GLOBAL module.name, then REDUCE: module.name("id")
        for global in [
            "os\nsystem",
            "builtins\neval",
            "__builtin__\nbytes",
            "posix\nsystem",
        ] {
            let p = [
                b"\x80\x02c",
                global.as_bytes(),
                b"\nX\x02\x00\x00\x00id\x85R.",
            ]
            .concat();
            let e = decode(&p, lim()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Decode);
            assert!(e.to_string().contains("forbidden global"), "{e}");
        }
        // REDUCE of a node class (calling it) is refused too
        let p = b"\x80\x02cpysyncobj.node\nTCPNode\n)R.";
        assert_eq!(decode(p, lim()).unwrap_err().kind(), ErrorKind::Decode);
    }

    #[test]
    fn build_mutates_alias() {
        // d = {}; n = TCPNode(); d['self'] = n; d['leader'] = n (BINGET)
        let p = b"\x80\x02}q\x00(X\x04\x00\x00\x00selfcpysyncobj.node\nTCPNode\n)\x81q\x01}(X\x03\x00\x00\x00_idX\x03\x00\x00\x00a:1ubX\x06\x00\x00\x00leaderh\x01u.";
        let v = decode(p, lim()).unwrap();
        let s = v.get("self").unwrap();
        assert_eq!(s.get("_id").and_then(Value::as_str), Some("a:1"));
        assert_eq!(v.get("leader"), Some(s));
    }

    #[test]
    fn cycles_and_depth() {
        // l = []; l.append(l)
        let p = b"\x80\x02]q\x00h\x00a.";
        assert!(decode(p, lim()).unwrap_err().to_string().contains("deeper"));
        // 100 nested lists
        let mut p = b"\x80\x02".to_vec();
        p.extend(vec![b']'; 100]);
        p.extend(vec![b'a'; 99]);
        p.push(b'.');
        assert!(decode(&p, lim())
            .unwrap_err()
            .to_string()
            .contains("deeper"));
        let v = decode(&p, limits(200, 10_000)).unwrap();
        assert!(matches!(v, Value::List(_)));
    }

    #[test]
    fn exponential_sharing_is_bounded() {
        // a = []; then 40 times: a = [a, a]
        let p = repeated(b"\x80\x02]q\x00", b"](h\x00h\x00eq\x00", 40, b".");
        let e = decode(&p, limits(64, 10_000)).unwrap_err();
        assert!(e.to_string().contains("item limit"), "{e}");
    }

    #[test]
    fn malformed() {
        for p in [
            &b""[..],
            b"\x80\x02",
            b"\x80\x02.",
            b"\x80\x02a.",
            b"\x80\x02}K\x01s.",
            b"\x80\x02(K\x01u.",
            b"\x80\x02h\x05.",
            b"\x80\x02X\xff\xff\xff\xff.",
            b"\x80\x02X\x02\x00\x00\x00\xff\xfe.",
            b"\x80\x02c_codecs\nencode\n.",
            b"\x80\x02K\x01b.",
            b"\x80\x06N.",
            b"\x80\x02(.",
            b"\x80\x02}(K\x01u\x94.",
            b"cos\nsystem",
        ] {
            assert_eq!(
                decode(p, lim()).unwrap_err().kind(),
                ErrorKind::Decode,
                "{p:?}"
            );
        }
    }

    #[test]
    fn memo_indices() {
        // LONG_BINPUT 300 then LONG_BINGET 300 and BINGET of a slot no PUT filled
        let p = b"\x80\x02](K\x07r\x2c\x01\x00\x00j\x2c\x01\x00\x00e.";
        assert_eq!(
            decode(p, lim()).unwrap(),
            Value::List(vec![Value::Int(7), Value::Int(7)])
        );
        let p = b"\x80\x02](K\x07r\x2c\x01\x00\x00h\x05e.";
        assert!(decode(p, lim())
            .unwrap_err()
            .to_string()
            .contains("memo key 5"));
        // a sparse index is refused by the item limit, before its slots are made
        let p = b"\x80\x02K\x07r\x00\x28\x6b\xee.";
        let e = decode(p, lim()).unwrap_err();
        assert!(e.to_string().contains("items"), "{e}");
    }

    #[test]
    fn item_limit() {
        let p = repeated(b"\x80\x02](", b"K\x01", 1000, b"e.");
        assert!(decode(&p, lim()).is_ok());
        let e = decode(&p, limits(32, 500)).unwrap_err();
        assert!(e.to_string().contains("items"), "{e}");
    }
}
