// A coding agent's Edit and MultiEdit calls (issue 23) shown as what they
// change — the file, and each replacement as a diff of the text replaced
// (old_string) and the text put in its place (new_string) — instead of
// their JSON, apart from the page's own script, which calls these views
// where it shows a call's arguments (callView in app.js). Every string
// goes through the page's txt (text only; invisible and special
// characters as counted badges). A call of another shape (a field that is
// not a string, an edit with a field of its own) is left to the page's
// own view; a field the view does not know is shown under it, as the page
// shows arguments.
const FOLD = 60; // rows shown before the rest is folded

// rows: old and new line by line — the lines both share at their ends
// unchanged, the ones between removed and added. Every line is shown.
function rows(a, b) {
	const A = a.split('\n');
	const B = b.split('\n');
	let s = 0;
	while (s < A.length && s < B.length && A[s] === B[s]) s++;
	let e = 0;
	while (e < A.length - s && e < B.length - s && A[A.length - 1 - e] === B[B.length - 1 - e]) e++;
	const ctx = (l) => l.map((t) => [' ', t]);
	return [...ctx(A.slice(0, s)), ...A.slice(s, A.length - e).map((t) => ['-', t]), ...B.slice(s, B.length - e).map((t) => ['+', t]), ...ctx(A.slice(A.length - e))];
}

const EDIT = ['old_string', 'new_string', 'replace_all'];
const isEdit = (e) => e && typeof e === 'object' && !Array.isArray(e) && typeof e.old_string === 'string' && typeof e.new_string === 'string' &&
	(e.replace_all === undefined || typeof e.replace_all === 'boolean');

function editView(h, e, i, n) {
	const { el, txt, count } = h;
	const row = ([sign, line]) => el('div', { class: 'd ' + (sign === '+' ? 'add' : sign === '-' ? 'del' : 'ctx') },
		el('span', { class: 'sign', 'aria-label': sign === '+' ? 'added' : sign === '-' ? 'removed' : 'unchanged' }, sign), txt(line, count));
	const what = e.replace_all ? 'replaces every occurrence of the removed text' : 'replaces one occurrence of the removed text';
	const sec = el('div', { class: 'dkey edit' }, el('div', { class: 'dname' }, n > 1 ? 'edit ' + (i + 1) + ' of ' + n + ' — ' : '', what,
		e.old_string === e.new_string ? ' (the same text: no change)' : '', e.old_string === '' ? ' (no text to replace: the file is created or written whole)' : ''));
	const rs = rows(e.old_string, e.new_string);
	if (rs.length <= FOLD) {
		sec.append(...rs.map(row));
		return sec;
	}
	const det = el('details', { class: 'fold' }, el('summary', null, 'show the other ' + (rs.length - FOLD / 2) + ' lines'), ...rs.slice(FOLD / 2).map(row));
	const note = el('p', { class: 'fold-note' }, '⚠ ' + (rs.length - FOLD / 2) + ' more lines of this edit are folded below: open them before you decide.');
	det.addEventListener('toggle', () => (note.hidden = det.open));
	sec.append(...rs.slice(0, FOLD / 2).map(row), note, det);
	return sec;
}

// view: file_path and the edits; null when the call is not of that shape.
function view(args, h, edits, known) {
	if (!args || typeof args !== 'object' || typeof args.file_path !== 'string' || !edits.every(isEdit) || !edits.every((e) => Object.keys(e).every((k) => EDIT.includes(k)))) return null;
	const { el, txt, count } = h;
	const out = el('div', { class: 'edits' },
		el('dl', { class: 'args' }, el('dt', null, 'file'), el('dd', null, el('code', { class: 'path' }, txt(args.file_path, count)))),
		el('div', { class: 'diff', 'aria-label': 'Changes to ' + args.file_path }, edits.map((e, i) => editView(h, e, i, edits.length))));
	if (!edits.length) out.append(el('p', { class: 'muted' }, 'no edits'));
	const rest = Object.fromEntries(Object.entries(args).filter(([k]) => !known.includes(k)));
	if (Object.keys(rest).length) out.append(h.rest(rest));
	return out;
}

globalThis.tollgateCallViews = Object.freeze({
	// Claude Code's Edit: one replacement in a file.
	Edit: (args, h) => view(args, h, [Object.fromEntries(EDIT.filter((k) => args && Object.hasOwn(args, k)).map((k) => [k, args[k]]))], ['file_path', ...EDIT]),
	// MultiEdit: replacements made one after the other, all or none.
	MultiEdit: (args, h) => (args && Array.isArray(args.edits) ? view(args, h, args.edits, ['file_path', 'edits']) : null),
});
