/* elementwise.cl - (being written) */
