'use strict';

// A real Cube 1.7 API over cubequeue's PostgreSQL store (--store postgresql://…): see scenarios.cjs.
require('./scenarios.cjs').cubeApiScenarios('postgresql');
