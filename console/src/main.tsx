import { render } from 'preact';

render(<main>console</main>, document.getElementById('app') ?? document.body);
