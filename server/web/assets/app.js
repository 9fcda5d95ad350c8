// tollgate reviewer page. Plain JavaScript, no framework, no build step.
// Rule one: data from the server is only ever put in the page as text
// (textContent, text nodes, createElement): never as HTML.
'use strict';
const D = document;
const B = D.body;
const $ = (id) => D.getElementById(id);

// ---------- JSON that keeps numbers exact ----------
const hasRaw = typeof JSON.rawJSON === 'function';
const isRaw = (v) => hasRaw && JSON.isRawJSON(v);
// lossy: a number literal a double cannot hold digit for digit.
function lossy(src, v) {
	if (!Number.isFinite(v)) return true;
	const m = src.replace(/^-/, '').replace(/[eE].*$/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
	return m.length > 15;
}
const exactNum = (src, v) => (hasRaw && lossy(src, v) ? JSON.rawJSON(src) : v);
function parseAPI(text) {
	return JSON.parse(text, function (k, v, ctx) {
		return typeof v === 'number' && ctx && ctx.source ? exactNum(ctx.source, v) : v;
	});
}

// parseJSON is a strict JSON parser for the editor: it says where the
// text is wrong (err.pos) in words, and keeps big numbers exact.
function parseJSON(src) {
	let i = 0;
	const n = src.length;
	const fail = (msg, at) => {
		const e = new SyntaxError(msg);
		e.pos = at === undefined ? i : at;
		throw e;
	};
	const ws = () => {
		while (i < n && ' \t\n\r'.includes(src[i])) i++;
	};
	const eat = (ch) => (ws(), src[i] === ch && ++i > 0);
	const what = () => (i >= n ? 'the end of the text' : "'" + src[i] + "'");
	const NUM = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
	const ESC = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
	function str() {
		const open = i++;
		let out = '';
		let start = i;
		for (;;) {
			if (i >= n) fail('a string is not closed: a " is missing', open);
			const c = src.charCodeAt(i);
			if (c === 34) { out += src.slice(start, i++); return out; }
			if (c === 92) {
				out += src.slice(start, i++);
				const e = src[i];
				if (Object.hasOwn(ESC, e)) {
					out += ESC[e];
					i++;
				} else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(src.slice(i + 1, i + 5))) {
					out += String.fromCharCode(parseInt(src.slice(i + 1, i + 5), 16));
					i += 5;
				} else fail(e === 'u' ? '\\u needs four hex digits' : 'unknown escape \\' + (e || ''), i - 1);
				start = i;
				continue;
			}
			if (c < 32) fail(c === 10 ? 'a line break inside a string: write it as \\n' : 'a control character inside a string: escape it');
			i++;
		}
	}
	function value() {
		ws();
		const c = src[i];
		if (c === '{' || c === '[') {
			const obj = c === '{';
			const close = obj ? '}' : ']';
			const o = obj ? {} : [];
			i++;
			if (eat(close)) return o;
			for (;;) {
				if (eat(close)) fail('a comma before ' + close + ' is not allowed in JSON', i - 1);
				if (obj) {
					if (src[i] !== '"') fail(src[i] === "'" ? 'keys need "double quotes", not single quotes' : 'expected a key in "double quotes", found ' + what());
					const at = i;
					const k = str();
					if (!eat(':')) fail("expected ':' after the key, found " + what());
					if (Object.hasOwn(o, k)) fail('the key "' + k + '" appears twice', at);
					Object.defineProperty(o, k, { value: value(), enumerable: true, writable: true, configurable: true });
				} else o.push(value());
				if (eat(',')) continue;
				if (eat(close)) return o;
				fail("expected ',' or '" + close + "' after a value, found " + what());
			}
		}
		if (c === '"') return str();
		NUM.lastIndex = i;
		const m = NUM.exec(src);
		if (m) return (i += m[0].length), exactNum(m[0], Number(m[0]));
		for (const w of ['true', 'false', 'null']) if (src.startsWith(w, i)) return (i += w.length), JSON.parse(w);
		if (c === "'") fail('strings need "double quotes", not single quotes');
		fail('expected a value (a "string", a number, true, false, null, {…} or […]), found ' + what());
	}
	const v = value();
	ws();
	if (i < n) fail('unexpected ' + what() + ' after the end of the value');
	return v;
}

function lineCol(src, pos) {
	const before = src.slice(0, pos);
	const line = before.split('\n').length;
	return { line, col: pos - before.lastIndexOf('\n'), text: src.split('\n')[line - 1] || '' };
}

// Canonical text of a value (keys sorted), to compare two values.
function canon(v) {
	if (v === null || typeof v !== 'object' || isRaw(v)) return JSON.stringify(v);
	if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
	return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
}
const pretty = (v) => JSON.stringify(v, null, 2);

// ---------- characters that hide or reorder text ----------
const SPECIAL = /[\0-\x08\x0B-\x1F\x7F-\x9F\xAD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u2028-\u202E\u2060-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB]|\uDB40[\uDC00-\uDC7F\uDD00-\uDDEF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const NAMES = {
	0xd: 'CARRIAGE RETURN', 0x1b: 'ESCAPE', 0x7f: 'DELETE', 0xad: 'SOFT HYPHEN',
	0x34f: 'COMBINING GRAPHEME JOINER', 0x61c: 'ARABIC LETTER MARK', 0x180e: 'MONGOLIAN VOWEL SEPARATOR',
	0x200b: 'ZERO WIDTH SPACE', 0x200c: 'ZERO WIDTH NON-JOINER', 0x200d: 'ZERO WIDTH JOINER',
	0x200e: 'LEFT-TO-RIGHT MARK', 0x200f: 'RIGHT-TO-LEFT MARK', 0x2028: 'LINE SEPARATOR', 0x2029: 'PARAGRAPH SEPARATOR',
	0x202a: 'LEFT-TO-RIGHT EMBEDDING', 0x202b: 'RIGHT-TO-LEFT EMBEDDING', 0x202c: 'POP DIRECTIONAL FORMATTING',
	0x202d: 'LEFT-TO-RIGHT OVERRIDE', 0x202e: 'RIGHT-TO-LEFT OVERRIDE', 0x2060: 'WORD JOINER',
	0x2066: 'LEFT-TO-RIGHT ISOLATE', 0x2067: 'RIGHT-TO-LEFT ISOLATE', 0x2068: 'FIRST STRONG ISOLATE',
	0x2069: 'POP DIRECTIONAL ISOLATE', 0xfeff: 'ZERO WIDTH NO-BREAK SPACE (BOM)',
};
function charName(cp) {
	if (NAMES[cp]) return NAMES[cp];
	if (cp < 0x20) return 'control character';
	if (cp >= 0x80 && cp <= 0x9f) return 'C1 control character';
	if (cp >= 0xd800 && cp <= 0xdfff) return 'lone surrogate (broken text)';
	if (cp >= 0xe0000 && cp <= 0xe007f) return 'TAG character (invisible)';
	if (cp >= 0xe0100) return 'variation selector (invisible)';
	return 'invisible formatting character';
}
const cpCode = (cp) => 'U+' + cp.toString(16).toUpperCase().padStart(4, '0');
function badge(ch) {
	const cp = ch.codePointAt(0);
	const code = cpCode(cp);
	return el('span', { class: 'cc', title: charName(cp) + ' ' + code }, '⟨' + code + '⟩');
}
// PAD: padding (over 3 blank lines, 16 blanks), counted as display.Text.
const BK = '[\\t \\xA0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000]';
const PAD = '(?:^|(?<=\\n))(?:' + BK + '*\\r?\\n){4,}|' + BK + '{17,}';
const pad = (m, n = m.split('\n').length - 1) =>
	el('span', { class: 'cc', title: 'padding' }, '⟨' + (n || m.length) + (n ? ' blank lines' + (m.includes('\r') ? ', CRLF' : '') : /^ +$/.test(m) ? ' spaces' : /^\t+$/.test(m) ? ' tabs' : ' blanks') + '⟩');
// txt: s as text nodes, with every special character (of re) as a
// visible badge. count.n counts them. LINE: newlines and tabs too.
const TEXT = new RegExp(PAD + '|' + SPECIAL.source, 'g');
const LINE = new RegExp(PAD + '|[\\t\\n]|' + SPECIAL.source, 'g');
function txt(s, count, re = TEXT) {
	s = String(s);
	const f = D.createDocumentFragment();
	let last = 0;
	let m;
	re.lastIndex = 0;
	while ((m = re.exec(s))) {
		const p = m[0].length > 2; // PAD, not a character
		if (m.index > last) f.append(s.slice(last, m.index));
		f.append(p ? pad(m[0]) : badge(m[0]));
		if (p && m[0].endsWith('\n')) f.append(re === LINE ? badge('\n') : '\n');
		if (count) count.n += p ? m[0].split('\r').length - 1 : 1;
		last = m.index + m[0].length;
	}
	if (last < s.length) f.append(s.slice(last));
	return f;
}
function countSpecial(v) {
	if (typeof v === 'string') return (v.match(SPECIAL) || []).length;
	if (v && typeof v === 'object' && !isRaw(v)) {
		let n = 0;
		for (const k of Object.keys(v)) n += countSpecial(k) + countSpecial(v[k]);
		return n;
	}
	return 0;
}
// escapeSpecial: JSON text with special characters as \u escapes, so a
// textarea shows them instead of obeying them.
const escapeSpecial = (json) =>
	json.replace(SPECIAL, (m) => Array.from(m, (_, j) => '\\u' + m.charCodeAt(j).toString(16).padStart(4, '0')).join(''));

// ---------- DOM ----------
function el(tag, props, ...kids) {
	const e = D.createElement(tag);
	if (props) {
		for (const k of Object.keys(props)) {
			const v = props[k];
			if (v == null || v === false) continue;
			if (k === 'class') e.className = v;
			else if (k === 'text') e.textContent = v;
			else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
			else if (k === 'value') e.value = v;
			else e.setAttribute(k, v === true ? '' : v);
		}
	}
	for (const c of kids.flat(Infinity)) if (c != null && c !== false) e.append(c);
	return e;
}
const btn = (label, cls, onclick, props) => el('button', Object.assign({ type: 'button', class: 'btn ' + (cls || ''), onclick }, props), label);
const clear = (node) => node.replaceChildren();
const onCtrlEnter = (ta, f) => ta.addEventListener('keydown', (e) => e.key === 'Enter' && (e.ctrlKey || e.metaKey) && f());
const focus = (id) => $(id) && $(id).focus();
const alertP = (text, cls = '') => el('p', { class: 'error-text ' + cls, role: 'alert' }, text);
// holdFocus empties node; what it returns gives the focus (and a field's
// selection) back to the element of the same id, once node is rebuilt.
function holdFocus(node) {
	const a = D.activeElement;
	const id = a && node.contains(a) ? a.id : '';
	const at = a && a.selectionStart != null ? [a.selectionStart, a.selectionEnd] : null; // not on a checkbox
	clear(node);
	return () => {
		const f = id && $(id);
		if (!f) return;
		f.focus();
		if (at && f.selectionStart != null) f.setSelectionRange(...at);
	};
}

const FOLD_CHARS = 2000;
const FOLD_LINES = 40;
const lines = (s) => s.split('\n').length;
const fmtN = (n) => n.toLocaleString('en-US');

// block: a long text shown whole, behind a fold when it is long (padding
// counted); count gathers the special characters.
function block(s, cls, count) {
	s = String(s);
	const pre = (t) => el('pre', { class: 'text ' + (cls || '') }, txt(t, count));
	const v = s.replace(TEXT, (m) => (m.length > 2 ? '⟨⟩' : m));
	const nl = lines(v);
	if (v.length <= FOLD_CHARS && nl <= FOLD_LINES) return pre(s);
	const cut = s.slice(0, 1200).split('\n').slice(0, 20).join('\n');
	const preview = el('pre', { class: 'text preview ' + (cls || '') }, txt(cut));
	const hidden = s.length - cut.length;
	const note = el('p', { class: 'fold-note' }, '⚠ ' + fmtN(hidden) + ' more characters (' + fmtN(nl) + ' lines in all) are folded below: open them before you decide.');
	const det = el('details', { class: 'fold' }, el('summary', null, 'show all ' + fmtN(s.length) + ' characters'), pre(s));
	det.addEventListener('toggle', () => {
		preview.hidden = det.open;
		note.hidden = det.open;
	});
	return el('div', { class: 'long' }, preview, note, det);
}

// valueView: an argument value: strings as text, anything else as JSON.
function valueView(v, shell, count) {
	if (typeof v === 'string') return block(v, shell ? 'code shell' : 'code', count);
	return block(pretty(v), 'code json', count);
}

function argsView(args, tool, count) {
	const dl = el('dl', { class: 'args' });
	const keys = args && typeof args === 'object' && !Array.isArray(args) ? Object.keys(args) : null;
	if (!keys) {
		dl.append(el('dt', null, 'arguments'), el('dd', null, valueView(args, false, count)));
		return dl;
	}
	if (!keys.length) dl.append(el('dd', { class: 'muted' }, 'no arguments'));
	const SHELL = ['cmd', 'command', 'script'];
	keys.sort((x, y) => SHELL.includes(y) - SHELL.includes(x)); // the command first
	for (const k of keys) {
		const shell = SHELL.includes(k) && typeof args[k] === 'string';
		dl.append(el('dt', null, txt(k, count), shell && tool === 'bash' ? el('span', { class: 'muted' }, ' (shell)') : null),
			el('dd', null, valueView(args[k], shell, count)));
	}
	return dl;
}

// ---------- time ----------
let clockOffset = 0; // server time minus this clock, in ms
const now = () => Date.now() + clockOffset;
function clockFrom(res) {
	const d = Date.parse(res.headers.get('Date') || '');
	if (!Number.isFinite(d)) return;
	const off = d + 500 - Date.now();
	clockOffset = Math.abs(off) > 1500 ? off : 0;
}
const ms = (t) => (t ? Date.parse(t) : NaN);
function when(t) {
	const d = new Date(ms(t));
	if (isNaN(d)) return '';
	const sameDay = d.toDateString() === new Date().toDateString();
	return (sameDay ? '' : d.toLocaleDateString() + ' ') + d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}
function left(msLeft) {
	const s = Math.ceil(msLeft / 1000);
	if (s >= 3600) return Math.floor(s / 3600) + ' h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + ' min';
	return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
}
function countdown(q) {
	const dl = ms(q.deadline);
	if (!Number.isFinite(dl)) return el('span', { class: 'countdown none' }, 'no deadline');
	const e = el('span', { class: 'countdown', 'data-deadline': String(dl) });
	tickOne(e);
	return e;
}
function tickOne(e) {
	const rest = Number(e.dataset.deadline) - now();
	const out = rest <= 0;
	const txtNow = out ? 'timed out' : left(rest) + ' left';
	if (e.textContent !== txtNow) e.textContent = txtNow;
	e.classList.toggle('urgent', !out && rest < 30000);
	e.classList.toggle('expired', out);
	return out;
}
function tick() {
	for (const e of D.querySelectorAll('.countdown[data-deadline]')) tickOne(e);
	const q = shown.q;
	if (q && q.status === 'pending' && expired(q) && !shown.expiredShown) {
		shown.expiredShown = true;
		renderDetail();
	}
}
const expired = (q) => Number.isFinite(ms(q.deadline)) && ms(q.deadline) <= now();

// ---------- API ----------
const S = { csrf: '', me: null, started: false }; // the CSRF token lives in memory only
class NetError extends Error {}
async function api(method, path, body, headers) {
	const h = Object.assign({ Accept: 'application/json' }, headers);
	if (body !== undefined) h['Content-Type'] = 'application/json';
	if (method !== 'GET' && S.csrf) h['X-CSRF-Token'] = S.csrf;
	let res;
	let text = '';
	try {
		res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
		text = await res.text();
	} catch (e) {
		throw new NetError('the server cannot be reached');
	}
	clockFrom(res);
	let data = null;
	if (text) {
		try {
			data = parseAPI(text);
		} catch (e) {
			data = { error: { message: text.slice(0, 300) } };
		}
	}
	const err = (data && data.error) || (res.ok ? null : { code: 'http_' + res.status, message: res.statusText });
	if (res.status === 401 && path !== '/v1/session') needSignIn();
	if (err && err.code === 'csrf') needSignIn('Your session has expired: sign in again.');
	return { status: res.status, ok: res.ok, data, err };
}
// call: api, with null when the server cannot be reached.
const call = (...a) => api(...a).catch(() => null);
const enc = encodeURIComponent;
const qPath = (q) => '/v1/questions/' + enc(q.thread_id) + '/' + enc(q.id);
function randomKey() {
	const b = new Uint8Array(16);
	crypto.getRandomValues(b);
	return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// ---------- banners and toasts ----------
const banners = new Map();
function banner(id, kind, text, actions) {
	dropBanner(id);
	const b = el('div', { class: 'banner ' + kind, role: kind === 'error' ? 'alert' : 'status' }, el('span', null, text), actions || []);
	banners.set(id, b);
	$('banners').append(b);
	return b;
}
function dropBanner(id) {
	const b = banners.get(id);
	if (b) b.remove();
	banners.delete(id);
}
let toastTimer;
function toast(text) {
	const t = $('toast');
	t.textContent = text;
	t.hidden = false;
	clearTimeout(toastTimer);
	toastTimer = setTimeout(() => (t.hidden = true), 4000);
}
const announce = (text) => ($('announce').textContent = text);
// offline: a request could not reach the server; retry runs it again.
function offline(what, retry) {
	banner('net', 'error', 'The server cannot be reached: ' + what + '. Nothing you typed is lost.', [
		btn('Retry', 'small', () => {
			dropBanner('net');
			retry();
		}),
	]);
}

// ---------- session ----------
function showSignIn(msg) {
	$('signin').hidden = false;
	$('signin-error').hidden = !msg;
	$('signin-error').textContent = msg || '';
	$('signin-token').focus();
}
function needSignIn(msg) {
	if (S.me && S.me.dev_mode) return;
	S.csrf = '';
	showSignIn(msg || 'Your session has ended: sign in again. What you typed is still on the page.');
}
async function boot() {
	const r = await call('GET', '/v1/session');
	if (!r) return offline('could not load the session', boot);
	if (r.ok) return start(r.data);
	showSignIn(r.status === 401 ? '' : explain(r));
}
$('signin-form').addEventListener('submit', async (ev) => {
	ev.preventDefault();
	const input = $('signin-token');
	const token = input.value.trim();
	if (!token) return showSignIn('Paste your token first.');
	$('signin-submit').disabled = true;
	const r = await call('POST', '/v1/session', { token });
	$('signin-submit').disabled = false;
	if (!r) return showSignIn('The server cannot be reached. Try again.');
	if (!r.ok) return showSignIn(r.status === 401 ? 'This token is not known to the server.' : explain(r));
	input.value = '';
	$('signin').hidden = true;
	start(r.data);
});
$('signout').addEventListener('click', async () => {
	try {
		await api('DELETE', '/v1/session');
	} catch (e) {
		/* signed out locally all the same */
	}
	S.csrf = '';
	location.reload();
});

function start(me) {
	S.me = me || {};
	S.csrf = S.me.csrf_token || '';
	$('signin').hidden = true;
	if (S.me.dev_mode) $('devbanner').hidden = false;
	if (S.me.model && !B.dataset.model) {
		$('model').textContent = 'model: ' + S.me.model;
		$('model').hidden = false;
	}
	const who = $('who');
	who.hidden = false;
	who.textContent = (S.me.name || '?') + (S.me.role ? ' · ' + S.me.role : '');
	$('signout').hidden = !!S.me.dev_mode;
	$('new-thread-top').hidden = false;
	if (S.started) {
		resync();
		if (!es) connectStream();
		return;
	}
	S.started = true;
	$('app').hidden = false;
	loadQueue().then(() => {
		const m = /^#q=([^/]*)\/(.*)$/.exec(location.hash);
		if (m) select(key(decodeURIComponent(m[1]), decodeURIComponent(m[2])));
		if (!sel && order.length) select(order[0]);
	});
	connectStream();
	setInterval(tick, 1000);
	setInterval(resync, 30000);
}

// ---------- the queue ----------
const key = (t, id) => JSON.stringify([t, id]);
const qKey = (q) => key(q.thread_id, q.id);
const queue = new Map(); // key -> pending question
const gone = new Set(); // keys resolved: never shown as pending again
let order = [];
let sel = null; // selected key
const shown = { q: null, note: null, expiredShown: false }; // what the detail shows
const drafts = new Map(); // key -> what the reviewer typed and the mode
function draft(k) {
	if (!drafts.has(k)) drafts.set(k, { mode: 'view', reason: '' });
	return drafts.get(k);
}

function sortQueue() {
	// Deadlines to the second, so the calls of one turn keep their order.
	const dl = (q) => (Number.isFinite(ms(q.deadline)) ? Math.round(ms(q.deadline) / 1000) : Infinity);
	order = [...queue.keys()].sort((a, b) => dl(queue.get(a)) - dl(queue.get(b)) || (a < b ? -1 : 1));
}

let syncing = null;
async function loadQueue() {
	const fresh = new Map();
	let cursor = '';
	let total = 0;
	try {
		for (let page = 0; page < 5; page++) {
			const r = await api('GET', '/v1/questions?status=pending&order=deadline&limit=200' + (cursor ? '&cursor=' + enc(cursor) : ''));
			if (!r.ok) {
				if (r.status !== 401) banner('queue', 'error', 'The queue could not be loaded: ' + explain(r));
				return;
			}
			for (const q of r.data.questions || []) fresh.set(qKey(q), q);
			total = r.data.total || fresh.size;
			cursor = r.data.next_cursor || '';
			if (!cursor) break;
		}
	} catch (e) {
		offline('the queue could not be loaded', loadQueue);
		return;
	}
	dropBanner('queue');
	for (const k of [...queue.keys()]) if (!fresh.has(k)) removeQ(k, null);
	for (const [k, q] of fresh) if (!gone.has(k)) queue.set(k, q);
	$('queue-more').hidden = total <= queue.size;
	$('queue-more').textContent = 'Showing ' + fmtN(queue.size) + ' of ' + fmtN(total) + ' (the oldest deadlines).';
	renderQueue();
}
function resync() {
	if (!S.started || syncing) return;
	syncing = loadQueue().finally(() => (syncing = null));
}

function addQ(q, isNew) {
	const k = qKey(q);
	if (gone.has(k) || q.status !== 'pending') return;
	const had = queue.has(k);
	queue.set(k, q);
	renderQueue();
	if (isNew && !had) announce('New question: ' + summary(q) + '. ' + queue.size + ' waiting.');
	if (!sel) select(k);
}
// removeQ: the question is no longer pending. info says how it ended,
// when known ({by, status, decision, reason, at}).
function removeQ(k, info) {
	gone.add(k);
	const was = queue.delete(k);
	if (was) renderQueue();
	if (k === sel && shown.q && info && !shown.mine && !(drafts.get(k) || {}).busy) {
		shown.note = info;
		renderDetail();
	}
}

// gist: the question in one line (for the queue).
function gist(q) {
	const p = q.payload || {};
	if (q.kind === 'ask') return p.question || '';
	if (q.kind === 'confirm') return p.message || '';
	const args = p.args || p.arguments || {};
	return args && typeof args === 'object' ? (typeof args.cmd === 'string' ? args.cmd : JSON.stringify(args)) : String(args);
}
const summary = (q) => (q.kind === 'ask' || q.kind === 'confirm' ? q.kind : q.tool || (q.payload || {}).tool_name || q.kind) + ': ' + gist(q);

function renderQueue() {
	sortQueue();
	const list = $('queue-list');
	const focused = D.activeElement && D.activeElement.dataset ? D.activeElement.dataset.key : null;
	clear(list);
	for (const k of order) {
		const q = queue.get(k);
		const p = q.payload || {};
		const warn = countSpecial(p.args || p.arguments || p.question || p.message || '') > 0;
		const line = gist(q).split('\n')[0];
		const b = el('button', { type: 'button', class: 'qitem', 'data-key': k, 'aria-current': k === sel ? 'true' : null, onclick: () => pick(k) },
			el('span', { class: 'qtop' }, el('span', { class: 'kind k-' + q.kind }, q.kind === 'approve' || q.kind === 'tool_interrupt' ? q.tool || p.tool_name || 'tool' : q.kind),
				warn ? el('span', { class: 'warn-dot', title: 'contains invisible or direction-changing characters' }, '⚠') : null,
				el('span', { class: 'grow' }), countdown(q)),
			el('span', { class: 'qsum' }, txt(line)),
			el('span', { class: 'qmeta' }, 'thread ', txt(q.thread_id), ' · ', when(q.created_at)));
		list.append(el('li', null, b));
	}
	const n = queue.size;
	$('count').textContent = n ? '(' + n + ')' : '';
	$('queue-empty').hidden = n > 0;
	D.title = (n ? '(' + n + ') ' : '') + 'tollgate';
	if (focused) {
		const f = list.querySelector('[data-key="' + CSS.escape(focused) + '"]');
		if (f) f.focus();
	}
}

// pick: a queue item was chosen; on a phone, the question (above) comes
// into view.
function pick(k) {
	select(k);
	if (matchMedia('(max-width: 860px)').matches) $('question').scrollIntoView({ block: 'start' });
}
function select(k) {
	const q = queue.get(k);
	if (!q) {
		if (k && !gone.has(k)) fetchAndShow(k);
		return;
	}
	if (sel !== k) {
		const at = (shown.at = performance.now());
		D.body.dataset.keysReady = '0';
		setTimeout(() => shown.at === at && (D.body.dataset.keysReady = '1'), 700);
	}
	sel = k;
	shown.q = q;
	shown.note = null;
	shown.mine = false;
	shown.expiredShown = false;
	history.replaceState(null, '', '#q=' + enc(q.thread_id) + '/' + enc(q.id));
	renderQueue();
	renderDetail();
	showThread(q.thread_id);
}
async function fetchAndShow(k) {
	const [t, id] = JSON.parse(k);
	try {
		const r = await api('GET', qPath({ thread_id: t, id }));
		if (!r.ok) return;
		if (r.data.status === 'pending') return addQ(r.data, false), select(k);
		sel = k;
		shown.q = r.data;
		shown.note = resolution(r.data);
		renderDetail();
		showThread(t);
	} catch (e) {
		/* the queue shows what there is */
	}
}
function move(d) {
	if (!order.length) return;
	let i = order.indexOf(sel);
	i = i < 0 ? 0 : Math.min(order.length - 1, Math.max(0, i + d));
	select(order[i]);
	const b = $('queue-list').querySelector('[aria-current="true"]');
	if (b) b.scrollIntoView({ block: 'nearest' });
}
function next() {
	sel = null;
	if (order.length) select(order[0]);
	else {
		shown.q = null;
		history.replaceState(null, '', location.pathname);
		renderDetail();
	}
}

// ---------- live events ----------
let es = null;
let streamRetry = 1000;
const EVENT_TYPES = ['question_asked', 'question_resolved', 'run_started', 'tool_result', 'run_parked', 'run_finished', 'aborted'];
function connectStream() {
	if (es) es.close();
	es = new EventSource('/v1/stream');
	let down = false;
	for (const t of EVENT_TYPES) es.addEventListener(t, onEvent);
	es.onopen = () => {
		streamRetry = 1000;
		dropBanner('stream');
		liveState(true);
		if (down) resync();
		down = false;
	};
	es.onerror = () => {
		down = true;
		liveState(false);
		if (es.readyState === EventSource.CLOSED) {
			// The server refused the stream (signed out, restarted...): try
			// again later, checking the session first.
			es = null;
			setTimeout(async () => {
				try {
					const r = await api('GET', '/v1/session');
					if (r.ok) connectStream();
				} catch (e) {
					setTimeout(connectStream, streamRetry);
				}
			}, streamRetry);
			streamRetry = Math.min(streamRetry * 2, 30000);
		}
	};
}
function liveState(up) {
	const e = $('live-state');
	e.hidden = false;
	e.textContent = up ? 'live' : 'reconnecting…';
	e.classList.toggle('down', !up);
	if (!up) banner('stream', 'warn', 'Live updates are interrupted; reconnecting. The queue may be out of date.');
}
function onEvent(msg) {
	let ev;
	try {
		ev = parseAPI(msg.data);
	} catch (e) {
		return;
	}
	const type = ev.type || msg.type;
	const t = ev.thread_id;
	const d = ev.data || {};
	if (type === 'question_asked' && d.question_id) {
		api('GET', qPath({ thread_id: t, id: d.question_id })).then((r) => r.ok && addQ(r.data, true), () => resync());
	} else if (type === 'question_resolved') {
		if (d.question_id) removeQ(key(t, d.question_id), { by: d.by, status: d.status, decision: d.decision, reason: d.reason, at: ev.at });
	} else if (type === 'aborted') {
		for (const k of [...queue.keys()]) if (queue.get(k).thread_id === t) removeQ(k, { status: 'aborted', reason: d.reason, at: ev.at, by: 'abort' });
		resync();
	} else if (type === 'run_finished' || type === 'run_parked') resync();
	if (t && t === thread.id) refreshThreadSoon();
}

// ---------- explaining errors ----------
function resolution(q) {
	if (!q) return null;
	let decision = '';
	if (q.answer && typeof q.answer === 'object') decision = q.answer.decision || q.answer.action || '';
	return { by: q.answered_by, status: q.status, decision, reason: q.reason, at: q.resolved_at };
}
const PAST = { approve: 'approved', deny: 'denied', reject: 'denied', edit: 'edited' };
const past = (d) => (Object.hasOwn(PAST, d) ? PAST[d] : d);
function describeResolution(n) {
	const by = n.by ? ' by ' + n.by : '';
	const at = n.at ? ' at ' + when(n.at) : '';
	if (n.status === 'timed_out') return 'This question timed out' + at + ': nobody answered in time, and the model was told so.';
	if (n.status === 'aborted') return 'This question was aborted' + at + (n.reason ? ': ' + n.reason : '') + '. Its run was stopped.';
	const dec = n.decision ? ' (' + past(n.decision) + ')' : '';
	return 'Already answered' + by + at + dec + (n.reason ? ': “' + n.reason + '”' : '') + '.';
}
const WHY = {
	expired: 'Too late: this question timed out, and the model was told nobody answered in time.',
	aborted: 'This question was aborted: its run was stopped, so the answer is not needed any more.',
	digest_mismatch: 'The call changed since it was shown here: look at it again before you answer.',
	csrf: 'Your session has expired: sign in again.',
	run_active: "This thread's run is still going: answer its questions or abort it.",
	too_large: 'That is too large for the server (over 1 MiB).',
	unavailable: 'The server is not taking requests right now (shutting down or its store is unreachable). Try again in a moment.',
};
function explain(r) {
	const e = r.err || {};
	const m = e.message ? ': ' + e.message : '.';
	if (e.code === 'already_answered') return describeResolution(resolution(e.question || (r.data && r.data.question)) || {});
	if (e.code === 'forbidden') return 'You may not do this' + (S.me && S.me.role ? ' with the role “' + S.me.role + '”' : '') + m;
	if (e.code === 'invalid_answer') return 'The server refused this answer' + m;
	if (Object.hasOwn(WHY, e.code)) return WHY[e.code];
	if (r.status >= 500) return 'Try again: the server failed to record it' + m;
	return (e.message || 'The server said ' + r.status) + '.';
}

// ---------- the selected question ----------
function renderDetail() {
	const pane = $('question');
	const refocus = holdFocus(pane);
	const q = shown.q;
	if (!q) return pane.append(el('div', { class: 'placeholder' }, el('h2', null, 'Nothing to review'), el('p', { class: 'muted' }, 'Questions that wait for a person appear in the queue as they are asked.')));
	const k = qKey(q);
	const dr = draft(k);
	const p = q.payload || {};
	const kind = q.kind || p.kind;
	const count = { n: 0 };
	const tool = q.tool || p.tool_name || '';
	const open = q.status === 'pending' && !shown.note && !expired(q);

	const head = el('div', { class: 'qhead' },
		el('h2', { class: 'qtitle' }, kind === 'approve' || kind === 'tool_interrupt' ? ['Run ', el('code', null, txt(tool || '?')), '?'] : kind === 'confirm' ? 'Confirm' : 'Question for you'),
		countdown(q));
	const meta = el('p', { class: 'qmeta' }, kind, ' · thread ', el('code', null, txt(q.thread_id)), ' · ', el('code', null, txt(q.id)), ' · asked ', when(q.created_at));
	const content = el('div', { class: 'qbody' });
	const warnSlot = el('div');
	pane.append(head, meta, warnSlot);
	if (shown.note) pane.append(el('p', { class: 'notice', role: 'status' }, describeResolution(shown.note), ' ', btn('Next question', 'small', next)));
	else if (q.status === 'pending' && expired(q)) pane.append(el('p', { class: 'notice expired-note', role: 'status' }, 'Timed out: the deadline passed, so the call was refused and the model is told nobody answered in time.'));
	pane.append(content);

	if (kind === 'approve' || kind === 'tool_interrupt') {
		const args = kind === 'approve' ? p.args : p.arguments;
		content.append(argsView(args || {}, tool, count));
		const details = Object.assign({}, p.details || {});
		const facts = el('dl', { class: 'facts' });
		for (const [label, name] of [['rule', 'matched_rule'], ['impact', 'impact'], ['policy error', 'policy_error']]) {
			if (details[name] == null) continue;
			facts.append(el('dt', null, label), el('dd', { class: name === 'policy_error' ? 'error-text' : '' }, typeof details[name] === 'string' ? txt(details[name], count) : valueView(details[name], false, count)));
			delete details[name];
		}
		for (const name of Object.keys(details)) {
			const v = details[name];
			const short = typeof v === 'string' ? v : JSON.stringify(v);
			facts.append(el('dt', null, txt(name)), el('dd', null, short.length <= 120 && !short.includes('\n') ? (typeof v === 'string' ? txt(v, count) : el('code', null, txt(short, count))) : valueView(v, false, count)));
		}
		if (facts.childNodes.length) content.prepend(facts);
		content.append(approveActions(q, dr, args || {}, open, kind));
	} else if (kind === 'confirm') content.append(block(p.message || '', 'prose', count), confirmActions(q, dr, open));
	else if (kind === 'ask') content.append(block(p.question || '', 'prose', count), askActions(q, dr, open));
	else {
		content.append(el('p', { class: 'muted' }, 'A question of kind “', txt(kind || '?'), '”. Its payload:'), valueView(p, false, count), rawActions(q, dr, open));
	}
	if (count.n) {
		warnSlot.append(el('p', { class: 'warning', role: 'alert' }, '⚠ This call contains invisible or direction-changing characters (' + count.n + ', shown as ⟨U+…⟩). What you see may not be what runs: read it carefully.'));
	}
	shown.warn = count.n;
	if (dr.error) pane.append(alertP(dr.error, 'answer-error'));
	refocus();
}

// send: post an answer and handle every outcome. On failure the
// draft (what was typed) stays as it is.
async function send(q, body, doneText, onProblems) {
	const k = qKey(q);
	const dr = draft(k);
	if (dr.busy) return;
	dr.busy = true;
	dr.error = null;
	for (const b of $('question').querySelectorAll('button[data-act]')) b.disabled = true;
	const r = await call('POST', qPath(q) + '/answer', body);
	if (!r) {
		dr.busy = false;
		renderDetail();
		offline('your answer was not sent', () => send(q, body, doneText, onProblems));
		return;
	}
	dr.busy = false;
	if (r.ok) {
		shown.mine = true;
		dropBanner('net');
		removeQ(k, null);
		drafts.delete(k);
		toast(doneText + (queue.size ? ' ' + queue.size + ' still waiting.' : ' Nothing else is waiting.'));
		announce(doneText);
		if (sel === k) next();
		return;
	}
	const code = r.err && r.err.code;
	if (code === 'invalid_answer' && onProblems) return onProblems(r.err.problems || [], r.err.message);
	if (code === 'already_answered' || code === 'expired' || code === 'aborted') {
		const info = code === 'already_answered' ? resolution(r.err.question || r.data.question) || {} : { status: code === 'expired' ? 'timed_out' : 'aborted', at: null };
		removeQ(k, null);
		shown.note = info;
		if (code === 'already_answered' && !info.by) dr.error = explain(r);
	} else if (code === 'digest_mismatch') {
		dr.error = explain(r);
		api('GET', qPath(q)).then((g) => {
			if (g.ok && sel === k) {
				shown.q = g.data;
				if (g.data.status === 'pending') queue.set(k, g.data);
				renderDetail();
			}
		}, () => {});
	} else dr.error = explain(r);
	renderDetail();
}

function actionBar(open, ...buttons) {
	const bar = el('div', { class: 'actions' }, buttons);
	if (!open) for (const b of bar.querySelectorAll('button')) b.disabled = true;
	return bar;
}

const DEFAULT_REASON = 'The reviewer denied this call and gave no reason.';

function approveActions(q, dr, args, open, kind) {
	const k = qKey(q);
	const wrap = el('div', { class: 'answer' });
	const digest = kind === 'approve' ? { digest: q.digest || undefined } : {};
	const doApprove = () => {
		if (shown.warn && !dr.armed) {
			dr.armed = true;
			renderDetail();
			$('act-approve').focus();
			return;
		}
		send(q, kind === 'approve' ? Object.assign({ decision: 'approve' }, digest) : { action: 'approve' }, 'Approved.');
	};
	const mode = dr.mode;
	const approveBtn = btn(dr.armed ? 'Approve despite the hidden characters' : 'Approve', 'primary' + (dr.armed ? ' danger' : ''), doApprove, { id: 'act-approve', 'data-act': 'approve', 'aria-keyshortcuts': 'a' });
	const denyBtn = btn('Deny…', 'deny', () => setMode(k, 'deny'), { id: 'act-deny', 'data-act': 'deny', 'aria-keyshortcuts': 'd', 'aria-expanded': String(mode === 'deny') });
	const editBtn = btn('Edit…', '', () => setMode(k, 'edit'), { id: 'act-edit', 'data-act': 'edit', 'aria-keyshortcuts': 'e', 'aria-expanded': String(mode === 'edit' || mode === 'diff') });
	// While the deny or edit form is open only its own buttons answer.
	wrap.append(actionBar(open && mode === 'view', approveBtn, denyBtn, editBtn));

	if (mode === 'deny') {
		const ta = el('textarea', { id: 'deny-reason', rows: '3', class: 'reason', placeholder: 'Why not, or what to do instead. For example: “Do not delete anything; list the files first.”', value: dr.reason,
			oninput: (e) => (dr.reason = e.target.value) });
		onCtrlEnter(ta, () => sendDeny());
		const sendDeny = () => {
			const reason = dr.reason.trim() || DEFAULT_REASON;
			send(q, kind === 'approve' ? Object.assign({ decision: 'deny', reason }, digest) : { action: 'reject', message: reason }, 'Denied; the model is told why.');
		};
		wrap.append(el('div', { class: 'subform' },
			el('label', { for: 'deny-reason' }, 'Reason — the model will read this'), ta,
			el('p', { class: 'hint' }, 'Left empty, the model reads: “' + DEFAULT_REASON + '” Ctrl+Enter sends.'),
			actionBar(open, btn('Deny and tell the model', 'deny', sendDeny, { 'data-act': 'send-deny', id: 'send-deny' }), btn('Cancel', '', () => setMode(k, 'view'), { id: 'cancel-deny' }))));
	}
	if (mode === 'edit' || mode === 'diff') wrap.append(editForm(q, dr, args, open, kind, digest));
	return wrap;
}

function setMode(k, mode) {
	const dr = draft(k);
	dr.mode = mode;
	dr.error = null;
	renderDetail();
	focus({ deny: 'deny-reason', edit: 'edit-json', diff: 'send-edit', view: 'act-approve' }[mode]);
}

function editForm(q, dr, args, open, kind, digest) {
	const k = qKey(q);
	if (dr.edit == null) dr.edit = escapeSpecial(pretty(args));
	const box = el('div', { class: 'subform editor' });
	let edited;
	try {
		edited = dr.mode === 'diff' ? parseJSON(dr.edit) : undefined;
	} catch (e) {
		dr.mode = 'edit';
	}
	if (dr.mode === 'diff') {
		const sendEdit = () =>
			send(q, kind === 'approve' ? Object.assign({ decision: 'edit', edited_args: edited }, digest) : { action: 'edit', arguments: edited }, 'Sent with your edits.', (problems, message) => {
				dr.mode = 'edit';
				dr.problems = { list: problems, message };
				renderDetail();
				focus('edit-json');
			});
		const same = canon(edited) === canon(args);
		box.append(el('h3', null, 'Check your changes'), same ? el('p', { class: 'hint' }, 'Nothing changed: the call would run as asked.') : diffView(args, edited, kind === 'tool_interrupt'),
			actionBar(open, btn(same ? 'Send unchanged' : 'Send the edited call', 'primary', sendEdit, { 'data-act': 'send-edit', id: 'send-edit' }), btn('Back to editing', '', () => setMode(k, 'edit'), { id: 'back-edit' })));
		return box;
	}
	const status = el('div', { id: 'edit-status', class: 'edit-status', 'aria-live': 'polite' });
	const ta = el('textarea', { id: 'edit-json', class: 'code-edit', rows: String(Math.min(24, Math.max(6, lines(dr.edit) + 1))), spellcheck: 'false', autocapitalize: 'off', autocomplete: 'off', 'aria-describedby': 'edit-status edit-problems', value: dr.edit });
	const check = () => {
		clear(status);
		try {
			const v = parseJSON(dr.edit);
			if (!v || typeof v !== 'object' || Array.isArray(v)) throw Object.assign(new SyntaxError('the arguments must be a JSON object: { "name": value, … }'), { pos: 0 });
			status.className = 'edit-status ok';
			status.append('Valid JSON.');
			return v;
		} catch (e) {
			const lc = lineCol(dr.edit, e.pos || 0);
			status.className = 'edit-status bad';
			status.append(el('strong', null, 'Invalid JSON'), ' at line ' + lc.line + ', column ' + lc.col + ': ' + e.message,
				el('pre', { class: 'caret' }, txt(lc.text.slice(Math.max(0, lc.col - 60), lc.col + 40)), '\n', ' '.repeat(Math.min(lc.col - 1, 60)) + '^'));
			return undefined;
		}
	};
	let timer;
	ta.addEventListener('input', () => {
		dr.edit = ta.value;
		clearTimeout(timer);
		timer = setTimeout(check, 250);
	});
	const review = () => {
		dr.edit = ta.value;
		if (check() === undefined) return ta.focus();
		setMode(k, 'diff');
	};
	onCtrlEnter(ta, review);
	const probs = dr.problems ? problemsView({ list: dr.problems.list, message: 'The server refused these arguments' + (dr.problems.list.length ? ':' : dr.problems.message ? ': ' + dr.problems.message : '.') }, '(the whole arguments)') : '';
	box.append(el('label', { for: 'edit-json' }, 'Arguments as JSON — edit, then review the changes before sending'), ta, status, probs,
		el('p', { class: 'hint' }, kind === 'tool_interrupt' ? 'Keys you give replace the call’s own; a key you delete keeps its old value.' : 'Invisible characters are written as \\u escapes. Ctrl+Enter reviews.'),
		actionBar(open, btn('Review changes', 'primary', review, { 'data-act': 'review', id: 'review-edit' }), btn('Reset', '', () => {
			dr.edit = escapeSpecial(pretty(args));
			dr.problems = null;
			renderDetail();
		}), btn('Cancel', '', () => setMode(k, 'view'), { id: 'cancel-edit' })));
	if (dr.edit !== escapeSpecial(pretty(args)) || dr.problems) setTimeout(check, 0);
	return box;
}

// diffView: key by key; a changed value line by line.
function diffView(a, b, merge) {
	const out = el('div', { class: 'diff', 'aria-label': 'Changes' });
	const keys = [...Object.keys(a), ...Object.keys(b).filter((x) => !Object.hasOwn(a, x))];
	const same = [];
	const row = (sign, text) => el('div', { class: 'd ' + (sign === '+' ? 'add' : sign === '-' ? 'del' : 'ctx') }, el('span', { class: 'sign', 'aria-label': sign === '+' ? 'added' : sign === '-' ? 'removed' : '' }, sign), txt(text));
	const asText = (v) => (typeof v === 'string' ? v : pretty(v));
	for (const k of keys) {
		const inA = Object.hasOwn(a, k);
		const inB = Object.hasOwn(b, k);
		if (inA && inB && canon(a[k]) === canon(b[k])) {
			same.push(k);
			continue;
		}
		const sec = el('div', { class: 'dkey' }, el('div', { class: 'dname' }, txt(k), inA && !inB ? (merge ? ' — removed here, but it keeps its old value (edits are merged)' : ' — removed') : !inA ? ' — added' : ' — changed'));
		for (const [sign, line] of lineDiff(inA ? asText(a[k]) : null, inB ? asText(b[k]) : null)) sec.append(row(sign, line));
		out.append(sec);
	}
	if (same.length) out.append(el('p', { class: 'muted' }, 'unchanged: ', same.map((s, i) => [i ? ', ' : '', el('code', null, txt(s))])));
	return out;
}
function lineDiff(x, y) {
	const A = x == null ? [] : x.split('\n');
	const Bl = y == null ? [] : y.split('\n');
	let s = 0;
	while (s < A.length && s < Bl.length && A[s] === Bl[s]) s++;
	let e = 0;
	while (e < A.length - s && e < Bl.length - s && A[A.length - 1 - e] === Bl[Bl.length - 1 - e]) e++;
	const a = A.slice(s, A.length - e);
	const b = Bl.slice(s, Bl.length - e);
	const out = A.slice(Math.max(0, s - 2), s).map((l) => [' ', l]);
	if (a.length * b.length > 4e6) {
		for (const l of a) out.push(['-', l]);
		for (const l of b) out.push(['+', l]);
	} else {
		// longest common subsequence, then walk it
		const w = b.length + 1;
		const t = new Uint32Array((a.length + 1) * w);
		for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) t[i * w + j] = a[i] === b[j] ? t[(i + 1) * w + j + 1] + 1 : Math.max(t[(i + 1) * w + j], t[i * w + j + 1]);
		let i = 0;
		let j = 0;
		while (i < a.length || j < b.length) {
			if (i < a.length && j < b.length && a[i] === b[j]) out.push([' ', a[i++]]), j++;
			else if (i < a.length && (j >= b.length || t[(i + 1) * w + j] >= t[i * w + j + 1])) out.push(['-', a[i++]]);
			else out.push(['+', b[j++]]);
		}
	}
	for (const l of A.slice(A.length - e, Math.min(A.length, A.length - e + 2))) out.push([' ', l]);
	return out;
}

function confirmActions(q, dr, open) {
	return el('div', { class: 'answer' }, actionBar(open,
		btn('Yes', 'primary', () => send(q, { yes: true }, 'Answered yes.'), { id: 'act-approve', 'data-act': 'approve', 'aria-keyshortcuts': 'a' }),
		btn('No', 'deny', () => send(q, { yes: false }, 'Answered no.'), { id: 'act-deny', 'data-act': 'deny', 'aria-keyshortcuts': 'd' })));
}

// askActions: choices as buttons; a form for a flat schema; JSON for
// another schema; else free text.
function askActions(q, dr, open) {
	const p = q.payload || {};
	const onProblems = (list, message) => {
		dr.problems = { list, message };
		renderDetail();
	};
	if (Array.isArray(p.choices) && p.choices.length) {
		return el('div', { class: 'answer' }, el('p', { class: 'hint' }, 'Choose one:'),
			actionBar(open, p.choices.map((c, i) => btn(txt(c), i ? '' : 'primary', () => send(q, c, 'Answered.'), { 'data-act': 'choice', id: i ? null : 'act-approve' }))));
	}
	const schema = p.schema && typeof p.schema === 'object' ? p.schema : null;
	const props = schema && schema.type === 'object' && schema.properties && typeof schema.properties === 'object' ? schema.properties : null;
	const flat = props && Object.values(props).every((s) => s && (['string', 'number', 'integer', 'boolean'].includes(s.type) || Array.isArray(s.enum)));
	const f = dr.form || (dr.form = {});
	const form = el('form', { class: 'subform', novalidate: true });
	let collect;
	if (flat) {
		const req = new Set(Array.isArray(schema.required) ? schema.required : []);
		Object.keys(props).forEach((name, n) => {
			const s = props[name];
			const id = 'f-' + n;
			let input;
			if (Array.isArray(s.enum)) input = el('select', { id }, el('option', { value: '' }, '—'), s.enum.map((v) => el('option', { value: JSON.stringify(v) }, txt(typeof v === 'string' ? v : JSON.stringify(v)))));
			else if (s.type === 'boolean') input = el('input', { id, type: 'checkbox' });
			else input = el(s.type === 'string' ? 'textarea' : 'input', { id, rows: '2', inputmode: s.type === 'string' ? null : 'decimal' });
			const box = input.type === 'checkbox';
			if (f[name] !== undefined) box ? (input.checked = f[name]) : (input.value = f[name]);
			const keep = () => (f[name] = box ? input.checked : input.value);
			input.addEventListener('input', keep);
			input.addEventListener('change', keep);
			const label = el('label', { for: id }, txt(s.title || name), req.has(name) ? ' (required)' : '');
			form.append(el('div', { class: 'field' }, box ? [input, ' ', label] : [label, input], s.description ? el('p', { class: 'hint' }, txt(s.description)) : null));
		});
		collect = () => {
			const out = {};
			const bad = [];
			for (const name of Object.keys(props)) {
				const s = props[name];
				const v = f[name];
				if (s.type === 'boolean') out[name] = !!v;
				else if (v !== undefined && v !== '') out[name] = s.enum ? JSON.parse(v) : s.type === 'string' ? v : Number(v);
				if (req.has(name) && out[name] === undefined) bad.push({ path: '/' + name, message: 'needs a value' });
				else if (!s.enum && s.type !== 'string' && s.type !== 'boolean' && out[name] !== undefined && !Number.isFinite(out[name])) bad.push({ path: '/' + name, message: 'must be a number' });
			}
			return bad.length ? onProblems(bad, 'Some fields need a value') : out;
		};
	} else {
		const id = schema ? 'answer-json' : 'answer-text';
		const k = schema ? 'json' : 'text';
		if (f[k] === undefined) f[k] = schema ? '{\n  \n}' : '';
		form.append(el('label', { for: id }, schema ? 'Your answer as JSON' : 'Your answer'),
			schema ? el('details', null, el('summary', null, 'the form’s schema'), block(pretty(schema), 'code json')) : null,
			el('textarea', { id, rows: schema ? '8' : '4', class: schema ? 'code-edit' : null, spellcheck: schema ? 'false' : null, value: f[k], oninput: (e) => (f[k] = e.target.value) }));
		collect = () => {
			if (!schema) return f.text.trim() ? f.text : onProblems([], 'Write an answer first');
			try {
				return parseJSON(f.json);
			} catch (err) {
				onProblems([], jsonError(f.json, err));
			}
		};
	}
	form.addEventListener('submit', (e) => {
		e.preventDefault();
		const v = collect();
		if (v !== undefined) send(q, v, 'Answered.', onProblems);
	});
	if (dr.problems) form.append(problemsView(dr.problems, '(the answer)'));
	form.append(actionBar(open, el('button', { type: 'submit', class: 'btn primary', 'data-act': 'send-answer', id: 'act-approve' }, 'Send answer')));
	return el('div', { class: 'answer' }, form);
}

function problemsView(pr, whole) {
	const ul = el('ul');
	for (const x of pr.list) ul.append(el('li', null, el('code', null, txt(x.path || whole)), ' ', txt(x.message || '')));
	return el('div', { id: 'edit-problems', class: 'problems', role: 'alert' }, el('p', null, txt(pr.message || 'The server refused this answer')), pr.list.length ? ul : null);
}
const jsonError = (src, e) => {
	const lc = lineCol(src, e.pos || 0);
	return 'Invalid JSON at line ' + lc.line + ', column ' + lc.col + ': ' + e.message;
};

function rawActions(q, dr, open) {
	return el('div', { class: 'answer' }, actionBar(open, btn('Answer yes (true)', 'primary', () => send(q, true, 'Answered.'), { 'data-act': 'approve', id: 'act-approve' }),
		btn('Answer no (false)', 'deny', () => send(q, false, 'Answered.'), { 'data-act': 'deny', id: 'act-deny' })));
}

// ---------- the conversation ----------
const thread = { id: '', events: [], after: 0, compose: '', abort: '', mode: 'view', newId: '', newText: '' };
const composed = new Map(); // thread id -> message being written
function showThread(id) {
	// Someone writing a new thread keeps the form: a question that comes in
	// meanwhile is shown when they start the thread or cancel.
	if (thread.mode === 'new') return void (thread.nextId = id);
	if (thread.id === id) return;
	if (thread.id) composed.set(thread.id, thread.compose);
	Object.assign(thread, { id, data: null, events: [], after: 0, mode: 'view', error: null, composeError: null, compose: composed.get(id) || '' });
	renderThread();
	refreshThread();
}
function refreshThreadSoon() {
	clearTimeout(thread.timer);
	thread.timer = setTimeout(refreshThread, 150);
}
async function refreshThread() {
	const id = thread.id;
	if (!id) return;
	if (thread.busy) return void (thread.again = true);
	thread.busy = true;
	try {
		const r = await api('GET', '/v1/threads/' + enc(id));
		if (id !== thread.id) return;
		if (!r.ok) thread.error = r.status === 404 ? 'This thread does not exist (yet).' : explain(r);
		else {
			thread.data = r.data;
			thread.error = null;
			for (let page = 0; page < 20; page++) {
				const ev = await api('GET', '/v1/threads/' + enc(id) + '/events?after=' + thread.after + '&limit=500');
				if (!ev.ok || id !== thread.id) break;
				const list = ev.data.events || [];
				thread.events.push(...list);
				if (list.length) thread.after = list[list.length - 1].seq;
				if (ev.data.next_after) thread.after = Math.max(thread.after, ev.data.next_after);
				if (list.length < 500) break;
			}
		}
		renderThread();
	} catch (e) {
		thread.error = 'The conversation could not be loaded: the server cannot be reached.';
		renderThread();
	} finally {
		thread.busy = false;
		if (thread.again) {
			thread.again = false;
			refreshThreadSoon();
		}
	}
}

// outcome: what happened to a call, in the words of the CLI
// (internal/display Outcome), from its result's trace; q: how its
// question was resolved. A policy block is never "denied"; a call cut off
// while it ran says so first.
function outcome(r, q) {
	const d = r.details || {};
	const s = decided(d, q);
	return d.outcome === 'unknown' ? 'outcome unknown: the run was interrupted while it ran' + (s ? ' (' + s + ')' : '') : s || (d.validation ? 'refused: the arguments are invalid' : d.error === 'unknown_tool' ? 'refused: unknown tool' : '');
}
function decided(d, q) {
	const it = !d.hitl && d.interrupt;
	const h = d.hitl || it;
	const p = (s) => (s ? ' (' + s + ')' : '');
	if (h) {
		const why = (it ? h.message : h.reason) || '';
		const by = 'by ' + (h.by || (q && q.by) || 'the reviewer');
		const rule = h.matched_rule || h.rule;
		const a = Object.assign({}, it && h.original_args, h.edited_args);
		const t = h.timeout_seconds;
		switch (h.decision) {
			case 'policy_deny':
				if (h.digest_mismatch === true) return 'blocked: the answer ' + by + " was given for other arguments than the call's";
				if ('edited_args' in h) return 'blocked: the edit ' + by + ' was refused' + p(why);
				return 'blocked by the policy' + p(rule ? 'rule ' + rule + (why ? ': ' + why : '') : why);
			case 'human_deny':
			case 'deny':
				return 'denied ' + by + p(why);
			case 'invalid_edit':
				return 'denied: the edit ' + by + ' is invalid' + p(why);
			case 'timed_out': // after Go's 1h0m5s
				return 'timed out' + (t > 0 ? ' after ' + (t < 3600 ? '' : ((t / 3600) | 0) + 'h') + (t < 60 ? '' : (((t % 3600) / 60) | 0) + 'm') + (t % 60) + 's' : '');
			case 'aborted':
				return 'aborted' + p(why);
			case 'edit':
				return 'edited ' + by + '; ran: ' + (Object.keys(a) + '' === 'cmd' && typeof a.cmd === 'string' ? a.cmd : JSON.stringify(a));
		}
	}
	return q && q.status === 'answered' ? (q.decision === 'approve' ? 'approved' : 'answered') + ' by ' + (q.by || 'the reviewer') : '';
}
// shellView: a bash result ({exit_code, stdout, stderr, ...}) as its exit
// code, then stdout and stderr when not empty; null for other content.
function shellView(c) {
	let o;
	try {
		o = JSON.parse(c);
	} catch (e) {}
	if (!o || typeof o.exit_code !== 'number' || typeof o.stdout + typeof o.stderr !== 'stringstring') return null;
	const out = (name) => o[name] && [el('div', { class: 'olabel' }, name), block(o[name], 'code out ' + name)];
	return el('div', null, el('div', { class: 'exit' + (o.exit_code || o.timed_out ? ' bad' : '') }, o.timed_out ? 'timed out' : 'exit ' + o.exit_code, o.truncated ? ' · output truncated' : ''),
		out('stdout'), out('stderr'), o.stdout || o.stderr ? null : el('div', { class: 'muted' }, 'no output'));
}

function entry(cls, who, at, ...kids) {
	return el('li', { class: 'msg ' + cls }, el('div', { class: 'mhead' }, el('span', { class: 'mwho' }, who), el('span', { class: 'grow' }), el('time', null, when(at))), kids);
}
function messageView(m) {
	if (m.role === 'user') return entry('user', 'user', m.created_at, block(m.text || '', 'prose'));
	if (m.role === 'assistant') {
		const calls = (m.tool_calls || []).map((c) => {
			const a = c.arguments;
			const onlyCmd = a && typeof a === 'object' && Object.keys(a).length === 1 && typeof a.cmd === 'string';
			return el('div', { class: 'call' }, el('div', { class: 'cname' }, '→ ', el('code', null, txt(c.name)), el('span', { class: 'muted' }, ' ', txt(c.id))), onlyCmd ? block(a.cmd, 'code shell') : valueView(a, false));
		});
		const cls = m.stop_reason === 'aborted' || m.stop_reason === 'error' ? 'assistant stopped' : 'assistant';
		return entry(cls, 'assistant', m.created_at, m.text ? block(m.text, 'prose') : null, calls);
	}
	if (m.role === 'tool' && m.result) {
		const r = m.result;
		const said = outcome(r, byCall.get(r.call_id));
		const kind = /^outcome/.test(said) ? 'error' : /^(blocked|denied|timed|aborted|refused)/.test(said) ? 'stop' : /^edited/.test(said) ? 'edit' : 'ok';
		return entry('tool' + (r.is_error ? ' error' : ''), 'result of ' + (r.tool_name || 'tool'), m.created_at,
			el('div', { class: 'rmeta' }, said ? el('span', { class: 'tag ' + kind }, txt(said, null, LINE)) : r.is_error ? el('span', { class: 'tag error' }, 'error') : null, el('span', { class: 'muted' }, txt(r.call_id || ''))),
			(!r.is_error && shellView(r.content)) || block(r.content || '', 'code out'));
	}
	return entry('other', m.role || '?', m.created_at, valueView(m, false));
}
function eventView(ev) {
	const d = ev.data || {};
	let text;
	if (ev.type === 'question_resolved') {
		const dec = past(d.decision);
		if (d.status === 'timed_out') text = '⏱ ' + (d.question_id || 'question') + ' timed out: nobody answered';
		else if (d.status === 'aborted') text = '⏹ ' + (d.question_id || 'question') + ' aborted';
		else text = (dec === 'denied' ? '✗ ' : '✓ ') + (d.by || 'someone') + ' ' + (dec || 'answered') + ' ' + (d.question_id || '');
		if (d.reason) text += ': “' + d.reason + '”';
	} else if (ev.type === 'tool_output') return entry('output', (d.agent || '') + ' ran ' + d.tool, ev.at, block(d.output, 'code'));
	else if (ev.type === 'aborted') text = '⏹ run aborted' + (d.reason ? ': ' + d.reason : '');
	else if (ev.type === 'run_finished' && d.error) text = '⚠ run stopped with an error: ' + d.error;
	else return null;
	return el('li', { class: 'msg event' + (ev.type === 'question_resolved' && d.status === 'answered' ? '' : ' ev-stop') }, el('span', null, txt(text)), el('time', null, when(ev.at)));
}
// resolutions: one per question; the host's entry (with decision) wins.
let byCall = new Map(); // call id -> how its question was resolved
function timeline() {
	const res = new Map();
	const other = [];
	for (const ev of thread.events) {
		if (ev.type === 'question_resolved') {
			const d = ev.data || {};
			const id = d.question_id || ev.seq;
			const prev = res.get(id);
			if (!prev) res.set(id, ev);
			else if (!(prev.data || {}).decision && d.decision) res.set(id, Object.assign({}, ev, { data: Object.assign({}, prev.data, d) }));
			else if (prev.data) prev.data = Object.assign({}, d, prev.data);
		} else other.push(ev);
	}
	byCall = new Map([...res.values()].map((ev) => [(ev.data || {}).call_id, ev.data]));
	const items = (thread.data.messages || []).map((m, i) => ({ t: ms(m.created_at) || 0, i, node: () => messageView(m) }));
	let i = items.length;
	for (const ev of [...res.values(), ...other]) items.push({ t: ms(ev.at) || 0, i: i++, node: () => eventView(ev) });
	return items.sort((a, b) => a.t - b.t || a.i - b.i);
}

function renderThread() {
	const body = $('thread-body');
	const list0 = body.querySelector('.msgs');
	const atEnd = !list0 || list0.scrollTop + list0.clientHeight >= list0.scrollHeight - 40;
	const refocus = holdFocus(body);
	$('thread-h').textContent = thread.mode === 'new' ? 'New thread' : 'Conversation';
	if (thread.mode === 'new') return renderNewThread(body);
	if (!thread.id) return body.append(el('p', { class: 'empty' }, 'Select a question to see its conversation, or start a new thread.'), btn('New thread', '', openNewThread));
	const th = thread.data;
	const state = th ? (th.run_state && th.run_state !== 'idle' ? th.run_state : th.status) : 'loading…';
	const stateText = { parked: 'waiting for answers', active: 'running', failed: 'failed', idle: 'idle', running: 'running' }[state] || state;
	body.append(el('div', { class: 'thead' }, el('code', null, txt(thread.id)), el('span', { class: 'chip st-' + state }, stateText), el('span', { class: 'grow' }),
		btn('New thread', 'small', openNewThread)));
	if (th && th.run_state === 'failed') {
		body.append(el('p', { class: 'warning' }, 'The run stopped with an error: ', txt(th.run_error || 'unknown'), ' ', btn('Retry the run', 'small', () => threadPost('/resume', undefined, 'Retrying the run.'))));
	}
	if (thread.error) body.append(alertP(thread.error));
	if (th) {
		const list = el('ol', { class: 'msgs' });
		for (const it of timeline()) {
			const n = it.node();
			if (n) list.append(n);
		}
		if (!list.childNodes.length) list.append(el('li', { class: 'empty' }, 'No messages yet.'));
		const pend = th.pending_questions || [];
		if (pend.length) list.append(el('li', { class: 'msg event' }, el('span', null, 'waiting for ' + pend.length + ' answer' + (pend.length > 1 ? 's' : '') + ': ', pend.map((pq, j) => [j ? ', ' : '', btn(txt(pq.id), 'link', () => pick(qKey(pq)), { 'data-key': qKey(pq) })]))));
		body.append(list);
		if (atEnd) requestAnimationFrame(() => (list.scrollTop = list.scrollHeight));
	}
	// compose and abort
	const running = th && th.status === 'running';
	const ta = el('textarea', { id: 'compose', rows: '2', placeholder: 'Message to the agent. With the demo model, lines starting with "$ " become commands.', value: thread.compose, oninput: (e) => (thread.compose = e.target.value) });
	onCtrlEnter(ta, sendMessage);
	const form = el('form', { class: 'compose', novalidate: true }, el('label', { for: 'compose' }, 'Send a message to start a run'), ta,
		thread.composeError ? alertP(thread.composeError) : null,
		el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'btn primary', id: 'send-message' }, 'Send'),
			running ? btn('Abort the run…', 'deny', () => {
				thread.mode = thread.mode === 'abort' ? 'view' : 'abort';
				renderThread();
				focus('abort-reason');
			}, { id: 'abort-open' }) : null));
	form.addEventListener('submit', (e) => {
		e.preventDefault();
		sendMessage();
	});
	body.append(form);
	if (thread.mode === 'abort' && running) {
		const ab = el('input', { id: 'abort-reason', type: 'text', value: thread.abort, placeholder: 'Why — the model and the audit log keep it', oninput: (e) => (thread.abort = e.target.value) });
		body.append(el('div', { class: 'subform' }, el('label', { for: 'abort-reason' }, 'Abort: every waiting call is denied with this reason'), ab,
			el('div', { class: 'actions' }, btn('Abort the run', 'deny', () => threadPost('/abort', { reason: thread.abort.trim() || 'aborted by the reviewer' }, 'Run aborted.'), { id: 'abort-send' }),
				btn('Cancel', '', () => {
					thread.mode = 'view';
					renderThread();
				}))));
	}
	refocus();
}

async function threadPost(suffix, body, doneText) {
	const r = await call('POST', '/v1/threads/' + enc(thread.id) + suffix, body);
	if (!r) return offline('the request was not sent', () => threadPost(suffix, body, doneText));
	if (r.ok) {
		thread.mode = 'view';
		thread.abort = '';
		thread.composeError = null;
		toast(doneText);
	} else thread.composeError = explain(r);
	renderThread();
	refreshThreadSoon();
}

let composeKey = null;
async function sendMessage() {
	const text = thread.compose;
	if (!text.trim()) return;
	// One key per message written: a retry after a network failure does
	// not start a second run.
	if (!composeKey || composeKey.text !== text || composeKey.thread !== thread.id) composeKey = { text, thread: thread.id, key: randomKey() };
	const r = await call('POST', '/v1/threads/' + enc(thread.id) + '/messages', { text }, { 'Idempotency-Key': composeKey.key });
	if (!r) return offline('your message was not sent', sendMessage);
	if (r.ok) {
		thread.compose = '';
		composeKey = null;
		thread.composeError = null;
		toast('Message sent; the run has started.');
	} else thread.composeError = explain(r);
	renderThread();
	refreshThreadSoon();
}

function openNewThread() {
	thread.mode = 'new';
	renderThread();
	focus('new-text');
	$('thread').scrollIntoView({ block: 'nearest' });
}
function renderNewThread(body) {
	const idIn = el('input', { id: 'new-id', type: 'text', value: thread.newId, spellcheck: 'false', autocomplete: 'off', placeholder: 'leave empty for a new id', oninput: (e) => (thread.newId = e.target.value) });
	const ta = el('textarea', { id: 'new-text', rows: '4', value: thread.newText, placeholder: 'What should the agent do? With the demo model: $ ls -la', oninput: (e) => (thread.newText = e.target.value) });
	const form = el('form', { class: 'subform', novalidate: true }, el('label', { for: 'new-id' }, 'Thread id (optional)'), idIn, el('label', { for: 'new-text' }, 'First message'), ta,
		thread.newError ? alertP(thread.newError) : null,
		el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'btn primary', id: 'new-start' }, 'Start the thread'), btn('Cancel', '', () => {
			const back = thread.nextId || thread.id;
			Object.assign(thread, { mode: 'view', id: '', nextId: null });
			if (back) showThread(back);
			else renderThread();
		})));
	form.addEventListener('submit', async (e) => {
		e.preventDefault();
		if (!thread.newText.trim()) { thread.newError = 'Write the first message.'; return renderThread(); }
		const r = await call('POST', '/v1/threads', thread.newId.trim() ? { id: thread.newId.trim() } : {});
		if (!r) {
			thread.newError = 'The server cannot be reached. Nothing was created; try again.';
			return renderThread();
		}
		if (!r.ok) {
			thread.newError = r.err && r.err.code === 'conflict' ? 'A thread with this id exists already: choose another id, or leave it empty.' : explain(r);
			return renderThread();
		}
		const id = r.data.id;
		const text = thread.newText;
		Object.assign(thread, { newId: '', newText: '', newError: null, mode: 'view', id: '', nextId: null });
		showThread(id);
		thread.compose = text;
		await sendMessage();
	});
	body.append(form);
}
$('new-thread-top').addEventListener('click', openNewThread);

// ---------- keyboard ----------
const help = $('help');
$('help-btn').addEventListener('click', () => help.showModal());
D.addEventListener('keydown', (e) => {
	if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || !S.started || !$('signin').hidden || help.open) return;
	const t = e.target;
	const typing = t && t.closest && t.closest('input, textarea, select, [contenteditable]');
	const q = shown.q;
	const k = q && qKey(q);
	if (e.key === 'Escape') {
		if (k && draft(k).mode !== 'view') {
			e.preventDefault();
			draft(k).armed = false;
			setMode(k, draft(k).mode === 'diff' ? 'edit' : 'view');
		} else if (k && draft(k).armed) {
			draft(k).armed = false;
			renderDetail();
		} else if (thread.mode !== 'view') {
			thread.mode = 'view';
			renderThread();
		}
		return;
	}
	if (typing) return;
	// An answer key clicks the shown question's button that names it, when
	// enabled (not while a deny or edit form is open). It does nothing on
	// a question that has only just come into view (a held or doubled key),
	// while another question's item has the focus, or to confirm an
	// approval despite hidden characters (that takes a click).
	const click = (id) => {
		const b = $(id);
		if (b && !b.disabled && b.getAttribute('aria-keyshortcuts') === e.key && !(e.key === 'a' && draft(k).armed)) b.click();
	};
	const other = t.dataset && t.dataset.key && t.dataset.key !== sel;
	if ('ade'.includes(e.key) && (e.preventDefault(), e.repeat || other || performance.now() - (shown.at || 0) < 700)) return;
	const keys = { j: () => move(1), k: () => move(-1), a: () => click('act-approve'), d: () => click('act-deny'), e: () => click('act-edit'), '?': () => (e.preventDefault(), help.showModal()) };
	if (Object.hasOwn(keys, e.key)) keys[e.key]();
});

// Typed text is kept on the page; warn before a reload throws it away.
window.addEventListener('beforeunload', (e) => {
	const typed = [...drafts.values()].some((d) => (d.reason && d.reason.trim()) || (d.mode === 'edit' && d.edit)) || thread.compose.trim();
	if (typed) e.preventDefault();
});

renderDetail();
boot();
