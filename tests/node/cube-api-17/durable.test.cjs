'use strict';

// A real Cube 1.7 API over cubequeue in durable mode (--data-dir): see scenarios.cjs.
require('./scenarios.cjs').cubeApiScenarios('durable');
