/** Digits and signs around the letters. */
const AROUND = /^[^\p{L}]+|[^\p{L}]+$/gu;

/** What is left of a password without the digits and signs around it (`trustno1` is `trustno`). */
function coreOf(text: string): string {
  return text.replace(AROUND, '');
}

/**
 * The words and phrases at the core of the most common passwords, as the published lists of leaked passwords
 * rank them (written out here by hand, lowercase and without spaces), a few in the disguises people give them.
 * Those lists are full of one of them with digits and signs around it: `password1234`, `Qwerty123456!`.
 */
const WORDS = new Set(
  `
password passw0rd p@ssw0rd p@ssword pa$$word pa55word passwd pass word passwort motdepasse contrasena senha parola
haslo wachtwoord salasana mypassword newpassword oldpassword yourpassword thepassword adminpassword rootpassword
userpassword securepassword strongpassword secretpassword defaultpassword testpassword changethispassword
qwerty qwertz azerty qwertyuiop qwertyu qwert asdf asdfg asdfgh asdfghjk asdfghjkl zxcv zxcvb zxcvbn zxcvbnm qazwsx
qazwsxedc qazxsw zaq1xsw2 zaq12wsx 1qaz2wsx 1q2w3e4r 1q2w3e 1q2w3e4r5t q1w2e3r4 q1w2e3r4t5 qweasd qweasdzxc qwe
admin administrator root toor superuser sysadmin webmaster manager user guest test tester testing demo
default changeme letmein welcome login logon access secret private master trustno1 opensesame nopassword
iloveyou iloveu iloveyousomuch iloveyouforever iloveyoubaby loveyou love lovely lover sunshine princess angel baby
babygirl beautiful butterfly flower rainbow unicorn
football baseball basketball soccer hockey golf tennis cricket rugby
dragon monkey tiger lion shadow superman batman spiderman ironman starwars pokemon pikachu minecraft fortnite roblox
naruto matrix mustang ferrari porsche
computer internet google facebook instagram samsung apple iphone microsoft windows linux ubuntu
summer winter spring autumn january february march april june july august september october november december
monday friday sunday
michael jennifer jordan charlie thomas daniel jessica ashley robert matthew andrew joshua hunter william anthony
liverpool chelsea arsenal barcelona realmadrid juventus manchester manutd
hello helloworld hellothere whatever freedom killer cheese chocolate cookie pepper ginger purple orange banana
vpn vpnpanel wireguard panel server network firewall router
abc abcd abcde abcdef abcdefg abcdefgh
correcthorsebatterystaple thequickbrownfox thequickbrownfoxjumpsoverthelazydog letmeinplease
`
    .split(/\s+/)
    .map(coreOf)
    .filter((core) => core !== ''),
);

/**
 * Keyboard rows and runs of digits and letters, forwards and backwards: any piece of one is a common password
 * (`123456789012`, `qwertyuiopas`, `1qaz2wsx3edc`).
 */
const RUNS = [
  '01234567890123456789012345678901234567890',
  'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz',
  'qwertyuiopasdfghjklzxcvbnmqwertyuiopasdfghjklzxcvbnm',
  "`1234567890-=qwertyuiop[]\\asdfghjkl;'zxcvbnm,./",
  '~!@#$%^&*()_+',
  'qwertzuiopasdfghjklyxcvbnm',
  'azertyuiopqsdfghjklmwxcvbn',
  '1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik,9ol.0p;/',
  '1qaz!qaz2wsx@wsx3edc#edc4rfv$rfv',
  'qazwsxedcrfvtgbyhnujmikolp',
  'zaq12wsxcde34rfvbgt56yhnmju78ik,.lo90p;/',
  '1q2w3e4r5t6y7u8i9o0p',
  'q1w2e3r4t5y6u7i8o9p0',
];
const SEQUENCES = [...RUNS, ...RUNS.map((run) => [...run].reverse().join(''))];

/** The same piece over and over: `aaaaaaaaaaaa`, `123123123123`, `qwertyqwerty`. */
const REPEATED = /^(.+?)\1+$/su;

/**
 * Whether a password is one of the most common, whatever its case and spaces: a piece of a keyboard row or a run,
 * a piece repeated, or a common word (or one repeated) with digits and signs around it.
 */
export function isCommonPassword(password: string): boolean {
  const text = password.toLowerCase().replace(/\s+/gu, '');
  if (REPEATED.test(text) || SEQUENCES.some((sequence) => sequence.includes(text))) return true;
  const core = coreOf(text);
  return WORDS.has(REPEATED.exec(core)?.[1] ?? core);
}
