// A unified diff as coloured lines, each line text.
import { h } from './dom.js';

export function diffView(patch) {
  const lines = patch.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return h('pre', { class: 'diff' }, lines.map((l) => {
    let c = 'ctx';
    if (l.startsWith('+++') || l.startsWith('---') || l.startsWith('diff ') || l.startsWith('index ')) c = 'file';
    else if (l.startsWith('@@')) c = 'hunk';
    else if (l.startsWith('+')) c = 'add';
    else if (l.startsWith('-')) c = 'del';
    return h('span', { class: 'dl ' + c }, l + '\n');
  }));
}
